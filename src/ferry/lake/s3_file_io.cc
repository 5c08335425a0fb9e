#include "ferry/lake/s3_file_io.h"

#include <algorithm>
#include <deque>
#include <future>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/lake/s3_client.h"

namespace ferry::lake {
namespace {

constexpr uint64_t kTailBytes = 64 << 10;  // read at once when a read touches a file's end

class S3ReadFile final : public RandomAccessFile {
 public:
  S3ReadFile(std::shared_ptr<S3Client> client, S3Location loc, uint64_t size)
      : client_(std::move(client)), loc_(std::move(loc)), size_(size), name_(loc_.ToUri()) {}

  uint64_t size() const override { return size_; }
  const std::string& name() const override { return name_; }

  Status ReadAt(uint64_t offset, uint64_t n, std::string* out) override {
    if (offset > size_ || n > size_ - offset) {
      return Status::Corruption(name_ + ": a read of " + std::to_string(n) + " bytes at offset " +
                                std::to_string(offset) + " runs past its end (" +
                                std::to_string(size_) + " bytes)");
    }
    if (n == 0) {
      out->clear();
      return Status::OK();
    }
    const uint64_t tail_start = size_ > kTailBytes ? size_ - kTailBytes : 0;
    if (offset >= tail_start) {
      if (!tail_loaded_) {
        FERRY_RETURN_IF_ERROR(client_->GetRange(loc_, tail_start, size_ - tail_start, &tail_));
        tail_loaded_ = true;
      }
      out->assign(tail_, static_cast<size_t>(offset - tail_start), static_cast<size_t>(n));
      return Status::OK();
    }
    return client_->GetRange(loc_, offset, n, out);
  }

 private:
  std::shared_ptr<S3Client> client_;
  S3Location loc_;
  uint64_t size_;
  std::string name_;
  std::string tail_;
  bool tail_loaded_ = false;
};

class S3NewFile final : public OutputStream {
 public:
  S3NewFile(std::shared_ptr<S3Client> client, S3Location loc)
      : client_(std::move(client)),
        loc_(std::move(loc)),
        part_bytes_(client_->settings().config.part_size_bytes),
        concurrency_(
            static_cast<size_t>(std::max(1, client_->settings().config.upload_concurrency))) {}

  ~S3NewFile() override {
    if (!closed_) Abandon();
  }

  Status Append(std::string_view data) override {
    if (!failed_.ok()) return failed_;
    size_ += data.size();
    while (!data.empty()) {
      const size_t take = std::min<size_t>(part_bytes_ - buffer_.size(), data.size());
      buffer_.append(data.substr(0, take));
      data.remove_prefix(take);
      if (buffer_.size() >= part_bytes_) {
        Status s = SendPart();
        if (!s.ok()) return Fail(s);
      }
    }
    return Status::OK();
  }

  Status Close() override {
    if (closed_) return failed_;
    if (!failed_.ok()) return failed_;
    Status s;
    if (upload_id_.empty()) {
      s = client_->Put(loc_, buffer_, /*if_none_match=*/true);
      std::string().swap(buffer_);
    } else {
      if (!buffer_.empty()) s = SendPart();
      if (s.ok()) s = Collect(0);
      if (s.ok()) {
        s = client_->CompleteMultipartUpload(loc_, upload_id_, etags_, size_,
                                             /*if_none_match=*/true);
      }
      if (s.ok()) upload_id_.clear();
    }
    if (!s.ok()) return Fail(s);
    closed_ = true;
    return Status::OK();
  }

  uint64_t Tell() const override { return size_; }
  uint64_t BufferedBytes() const override {
    return buffer_.capacity() + in_flight_.size() * part_bytes_;
  }

 private:
  // Hands the full buffer to a part upload, waiting first while `concurrency_` are in flight.
  Status SendPart() {
    if (upload_id_.empty()) {
      FERRY_ASSIGN_OR_RETURN(upload_id_, client_->CreateMultipartUpload(loc_));
    }
    FERRY_RETURN_IF_ERROR(Collect(concurrency_ - 1));
    const int number = static_cast<int>(etags_.size() + in_flight_.size()) + 1;
    if (number > 10000) {
      return Status::InvalidArgument(
          loc_.ToUri() + " would need more than 10000 parts of " + std::to_string(part_bytes_) +
          " bytes (the S3 limit): raise destination.s3.part_size or lower target_file_size");
    }
    in_flight_.push_back(std::async(
        std::launch::async,
        [client = client_, loc = loc_, id = upload_id_, number, part = std::move(buffer_)] {
          return client->UploadPart(loc, id, number, part);
        }));
    buffer_ = std::string();
    return Status::OK();
  }

  // Waits for the oldest part uploads until at most `keep` are in flight; their ETags, in part
  // order, go to etags_.
  Status Collect(size_t keep) {
    Status first;
    while (in_flight_.size() > keep) {
      Result<std::string> etag = in_flight_.front().get();
      in_flight_.pop_front();
      if (!etag.ok()) {
        if (first.ok()) first = etag.status();
        keep = 0;  // a failed part fails the file: wait for the others, then give up
        continue;
      }
      if (first.ok()) {
        etags_.push_back(std::move(*etag));
        FaultPoint("s3.mid_multipart_upload");
      }
    }
    return first;
  }

  Status Fail(const Status& s) {
    Abandon();
    failed_ = s;
    return s;
  }

  // Waits for the parts in flight and aborts the upload: nothing of the file stays on the store.
  void Abandon() {
    (void)Collect(0);
    closed_ = true;
    std::string().swap(buffer_);
    if (upload_id_.empty()) return;
    Status s = client_->AbortMultipartUpload(loc_, upload_id_);
    if (!s.ok()) {
      FERRY_LOG(kWarn) << "could not abort the multipart upload of " << loc_.ToUri() << ": "
                       << s.message() << " (`ferry maintain` removes it later)";
    }
    upload_id_.clear();
  }

  std::shared_ptr<S3Client> client_;
  S3Location loc_;
  const uint64_t part_bytes_;
  const size_t concurrency_;
  std::string buffer_;
  uint64_t size_ = 0;
  std::string upload_id_;  // while a multipart upload is open
  std::deque<std::future<Result<std::string>>> in_flight_;
  std::vector<std::string> etags_;
  Status failed_;
  bool closed_ = false;
};

class S3FileIO final : public FileIO {
 public:
  explicit S3FileIO(std::shared_ptr<S3Client> client) : client_(std::move(client)) {}

  S3Client& client() const { return *client_; }

  std::string Describe() const override { return "S3 (" + client_->settings().Describe() + ")"; }

  Result<std::unique_ptr<RandomAccessFile>> OpenFile(const std::string& uri,
                                                     std::optional<uint64_t> size) override {
    FERRY_ASSIGN_OR_RETURN(S3Location loc, ParseS3Location(uri));
    if (!size) {
      FERRY_ASSIGN_OR_RETURN(S3Head head, client_->Head(loc));
      size = head.size_bytes;
    }
    return std::unique_ptr<RandomAccessFile>(new S3ReadFile(client_, std::move(loc), *size));
  }

  Result<std::string> Read(const std::string& uri) override {
    FERRY_ASSIGN_OR_RETURN(S3Location loc, ParseS3Location(uri));
    return client_->Get(loc);
  }

  using FileIO::NewFile;
  // An object is durable when its upload completes, whatever `durability` asks.
  Result<std::unique_ptr<OutputStream>> NewFile(const std::string& uri, Durability) override {
    FERRY_ASSIGN_OR_RETURN(S3Location loc, ParseS3Location(uri));
    if (loc.key.empty() || loc.key.back() == '/') {
      return Status::InvalidArgument("'" + uri + "' names no file (an empty key or a folder)");
    }
    return std::unique_ptr<OutputStream>(new S3NewFile(client_, std::move(loc)));
  }

  Result<std::vector<FileInfo>> List(const std::string& prefix) override {
    FERRY_ASSIGN_OR_RETURN(S3Location loc, ParseS3Location(prefix));
    FERRY_ASSIGN_OR_RETURN(auto objects, client_->List(loc.bucket, loc.key));
    std::vector<FileInfo> out;
    out.reserve(objects.size());
    for (auto& o : objects) {
      out.push_back(FileInfo{"s3://" + loc.bucket + "/" + o.key, o.size_bytes, o.modified_ms});
    }
    return out;
  }

  Status Delete(const std::string& uri) override {
    FERRY_ASSIGN_OR_RETURN(S3Location loc, ParseS3Location(uri));
    return client_->Delete(loc);
  }

  Result<FileInfo> Stat(const std::string& uri) override {
    FERRY_ASSIGN_OR_RETURN(S3Location loc, ParseS3Location(uri));
    FERRY_ASSIGN_OR_RETURN(S3Head head, client_->Head(loc));
    return FileInfo{uri, head.size_bytes};
  }

  Result<int64_t> AbortUploadsBegunBefore(const std::string& prefix, int64_t before_ms) override {
    FERRY_ASSIGN_OR_RETURN(S3Location loc, ParseS3Location(prefix));
    FERRY_ASSIGN_OR_RETURN(auto uploads, client_->ListMultipartUploads(loc.bucket, loc.key));
    int64_t aborted = 0;
    for (const auto& u : uploads) {
      if (u.initiated_ms == 0 || u.initiated_ms >= before_ms) continue;
      FERRY_RETURN_IF_ERROR(
          client_->AbortMultipartUpload(S3Location{loc.bucket, u.key}, u.upload_id));
      ++aborted;
    }
    return aborted;
  }

 private:
  std::shared_ptr<S3Client> client_;
};

}  // namespace

std::optional<S3Settings> S3SettingsOf(const FileIO& io) {
  auto* s3 = dynamic_cast<const S3FileIO*>(&io);
  if (s3 == nullptr) return std::nullopt;
  return s3->client().settings();
}

Result<std::shared_ptr<FileIO>> OpenVendedS3FileIO(const std::string& location,
                                                   const S3Config& base, const VendedS3& vended,
                                                   std::function<Result<VendedS3>()> refresh) {
  S3Config c = base;
  if (vended.endpoint) c.endpoint = vended.endpoint;
  if (vended.region) c.region = vended.region;
  if (vended.path_style) c.path_style = vended.path_style;
  // Only the vended credentials: nothing of this machine's own (variables, profiles) is used.
  const S3Credentials creds = vended.credentials;
  EnvLookup env = [creds](const std::string& name) -> std::optional<std::string> {
    if (name == "AWS_ACCESS_KEY_ID") return creds.access_key_id;
    if (name == "AWS_SECRET_ACCESS_KEY") return creds.secret_access_key;
    if (name == "AWS_SESSION_TOKEN" && !creds.session_token.empty()) return creds.session_token;
    if (name == "AWS_SHARED_CREDENTIALS_FILE" || name == "AWS_CONFIG_FILE") return "/dev/null";
    return std::nullopt;
  };
  FERRY_ASSIGN_OR_RETURN(auto io, OpenS3FileIO(location, c, env));
  auto* s3 = static_cast<S3FileIO*>(io.get());
  S3Credentials named = creds;
  named.source = "credentials vended by the catalog";
  s3->client().SetCredentials(
      named, vended.expires_at_ms,
      refresh
          ? S3Client::CredentialRefresh([refresh]() -> Result<std::pair<S3Credentials, int64_t>> {
              FERRY_ASSIGN_OR_RETURN(VendedS3 v, refresh());
              return std::make_pair(v.credentials, v.expires_at_ms);
            })
          : S3Client::CredentialRefresh());
  return io;
}

Result<std::shared_ptr<FileIO>> OpenS3FileIO(const std::string& location, const S3Config& config,
                                             const EnvLookup& env) {
  FERRY_RETURN_IF_ERROR(ParseS3Location(location).status());
  if (config.part_size_bytes < kS3MinPartBytes || config.part_size_bytes > kS3MaxPartBytes) {
    return Status::InvalidArgument(
        "destination.s3.part_size must be from 5MiB to 5GiB (S3's "
        "limits for a part), not " +
        std::to_string(config.part_size_bytes) + " bytes");
  }
  FERRY_ASSIGN_OR_RETURN(S3Settings settings, ResolveS3Settings(config, env));
  return std::shared_ptr<FileIO>(new S3FileIO(std::make_shared<S3Client>(std::move(settings))));
}

}  // namespace ferry::lake
