#include "ferry/lake/file_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <optional>
#include <system_error>

#include "ferry/base/fs.h"
#include "ferry/base/uuid.h"
#include "ferry/lake/s3_file_io.h"

namespace ferry::lake {

std::string SchemeOf(const std::string& location) {
  // RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"
  if (location.empty() || !std::isalpha(static_cast<unsigned char>(location[0]))) return "";
  for (size_t i = 1; i < location.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(location[i]);
    if (c == ':') {
      std::string s = location.substr(0, i);
      std::transform(s.begin(), s.end(), s.begin(),
                     [](unsigned char x) { return static_cast<char>(std::tolower(x)); });
      return s;
    }
    if (!std::isalnum(c) && c != '+' && c != '-' && c != '.') return "";
  }
  return "";
}

std::string JoinLocation(std::string_view base, std::string_view name) {
  return JoinPath(base, name);
}

std::string ToUri(const std::string& path_or_uri) {
  if (path_or_uri.find("://") != std::string::npos) return path_or_uri;
  return "file://" + path_or_uri;
}

Result<std::string> LocalPath(const std::string& uri) {
  std::string path;
  if (uri.rfind("file://", 0) == 0) {
    path = uri.substr(7);
  } else if (uri.rfind("file:/", 0) == 0) {
    path = uri.substr(5);
  } else if (!uri.empty() && uri[0] == '/') {
    path = uri;
  }
  if (path.empty() || path[0] != '/') {
    return Status::InvalidArgument("location '" + uri + "' is not a local file (file://)");
  }
  return path;
}

Status FileIO::WriteNew(const std::string& location, std::string_view data) {
  FERRY_ASSIGN_OR_RETURN(auto out, NewFile(location));
  FERRY_RETURN_IF_ERROR(out->Append(data));
  return out->Close();
}

bool FileIO::Exists(const std::string& location) { return Stat(location).ok(); }

namespace {

// The local atomic put: the bytes go to "<path>.tmp-<pid>-<n>" beside the file; Close() fsyncs
// them, renames the temporary file to `path` unless that exists, and fsyncs the folder (with
// Durability::kOnPersist it only renames: Persist syncs). Until then readers see no file at
// `path`; a stream destroyed before removes its temporary file. The temporary file (and the
// folders above it) is made once kHeldBytes have been appended, or by Close: a small file is
// written whole on the thread that closes it, and one never closed touched no folder.
class LocalNewFile final : public OutputStream {
 public:
  LocalNewFile(std::string path, bool sync) : path_(std::move(path)), sync_(sync) {}
  ~LocalNewFile() override {
    if (file_ && !placed_) (void)RemoveFile(file_->path());
  }
  Status Append(std::string_view data) override {
    if (!file_) {
      if (held_.size() + data.size() <= kHeldBytes) {
        held_.append(data);
        return Status::OK();
      }
      FERRY_RETURN_IF_ERROR(Start());
    }
    return file_->Append(data);
  }
  Status Close() override {
    if (placed_) return Status::OK();
    if (!file_) FERRY_RETURN_IF_ERROR(Start());
    FERRY_RETURN_IF_ERROR(sync_ ? file_->Close() : file_->CloseUnsynced());
    FERRY_RETURN_IF_ERROR(RenameNoReplace(file_->path(), path_));
    placed_ = true;
    return sync_ ? FsyncDir(ParentDir(path_)) : Status::OK();
  }
  uint64_t Tell() const override { return file_ ? file_->size() : held_.size(); }
  uint64_t BufferedBytes() const override { return held_.capacity(); }

 private:
  static constexpr size_t kHeldBytes = 1 << 20;

  Status Start() {
    static std::atomic<uint64_t> counter{0};
    FERRY_RETURN_IF_ERROR(MakeDirs(ParentDir(path_)));
    std::string tmp = path_ + ".tmp-" + std::to_string(::getpid()) + "-" +
                      std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
    FERRY_ASSIGN_OR_RETURN(WritableFile f, WritableFile::Create(tmp));
    file_.emplace(std::move(f));
    Status s = file_->Append(held_);
    std::string().swap(held_);
    return s;
  }

  std::string path_;
  bool sync_;
  std::string held_;                  // appended before the temporary file was made
  std::optional<WritableFile> file_;  // the temporary file, once made
  bool placed_ = false;
};

class Local final : public FileIO {
 public:
  std::string Describe() const override { return "local files"; }

  Result<std::unique_ptr<RandomAccessFile>> OpenFile(const std::string& uri,
                                                     std::optional<uint64_t>) override {
    FERRY_ASSIGN_OR_RETURN(std::string p, LocalPath(uri));
    return OpenLocalFile(p);
  }
  Result<std::string> Read(const std::string& uri) override {
    FERRY_ASSIGN_OR_RETURN(std::string p, LocalPath(uri));
    return ReadFile(p);
  }
  using FileIO::NewFile;
  Result<std::unique_ptr<OutputStream>> NewFile(const std::string& uri,
                                                Durability durability) override {
    FERRY_ASSIGN_OR_RETURN(std::string p, LocalPath(uri));
    if (FileExists(p)) return Status::AlreadyExists("cannot create '" + p + "': File exists");
    return std::unique_ptr<OutputStream>(
        new LocalNewFile(std::move(p), durability == Durability::kOnClose));
  }
  Status Persist(const std::vector<std::string>& locations) override {
    std::vector<std::string> paths;
    paths.reserve(locations.size());
    for (const std::string& l : locations) {
      FERRY_ASSIGN_OR_RETURN(std::string p, LocalPath(l));
      paths.push_back(std::move(p));
    }
    return SyncFiles(paths);
  }
  Result<std::vector<FileInfo>> List(const std::string& prefix) override {
    FERRY_ASSIGN_OR_RETURN(std::string p, LocalPath(prefix));
    // The folder to walk: the prefix itself when it names one, else the folder it ends in.
    const std::string dir = p.back() == '/' ? p : ParentDir(p);
    std::vector<FileInfo> out;
    std::error_code ec;
    namespace fs = std::filesystem;
    if (!fs::is_directory(dir, ec)) return out;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      const std::string path = it->path().string();
      if (path.rfind(p, 0) != 0) continue;
      struct stat st;
      if (::stat(path.c_str(), &st) != 0) continue;  // removed meanwhile
      const int64_t modified_ms = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 +
                                  static_cast<int64_t>(st.st_mtim.tv_nsec / 1000000);
      out.push_back(FileInfo{"file://" + path, static_cast<uint64_t>(st.st_size), modified_ms});
    }
    if (ec) return Status::IOError("cannot list '" + dir + "': " + ec.message());
    std::sort(out.begin(), out.end(),
              [](const FileInfo& a, const FileInfo& b) { return a.location < b.location; });
    return out;
  }
  Status Delete(const std::string& uri) override {
    FERRY_ASSIGN_OR_RETURN(std::string p, LocalPath(uri));
    return RemoveFile(p);
  }
  Result<FileInfo> Stat(const std::string& uri) override {
    FERRY_ASSIGN_OR_RETURN(std::string p, LocalPath(uri));
    FERRY_ASSIGN_OR_RETURN(uint64_t size, FileSize(p));
    return FileInfo{uri, size};
  }
};

}  // namespace

std::shared_ptr<FileIO> LocalFileIO() {
  static std::shared_ptr<FileIO> io = std::make_shared<Local>();
  return io;
}

Result<std::shared_ptr<FileIO>> OpenFileIO(const std::string& location, const S3Config& s3) {
  const std::string scheme = SchemeOf(location);
  if (scheme == "file" || (scheme.empty() && !location.empty() && location[0] == '/')) {
    FERRY_RETURN_IF_ERROR(LocalPath(location).status());
    return LocalFileIO();
  }
  if (scheme.empty()) {
    return Status::InvalidArgument("location '" + location +
                                   "' is neither an absolute path nor a URI (file:///...)");
  }
  if (scheme == "s3" || scheme == "s3a") return OpenS3FileIO(location, s3);
  return Status::InvalidArgument(
      "'" + location + "' is on " + scheme + "://, which ferry cannot write: Iceberg tables go " +
      "to local folders or S3-compatible object stores. Set the warehouse to a local folder (a " +
      "path such as ./warehouse, or a file:///... URI) or to s3://bucket/prefix");
}

Status ProbeStorage(FileIO& io, const std::string& location) {
  const std::string probe = JoinLocation(location, ".ferry-probe-" + NewUuid());
  const std::string data = "ferry check: this file is written and deleted again\n";
  auto listed = io.List(JoinLocation(location, ""));
  if (!listed.ok()) return listed.status().WithContext("listing the warehouse " + location);
  Status s = io.WriteNew(probe, data);
  if (!s.ok()) return s.WithContext("writing the probe file " + probe);
  auto back = io.Read(probe);
  if (!back.ok() || *back != data) {
    (void)io.Delete(probe);
    if (!back.ok()) return back.status().WithContext("reading the probe file " + probe + " back");
    return Status::IOError("the probe file " + probe + " read back differs from what was written");
  }
  s = io.Delete(probe);
  if (!s.ok()) return s.WithContext("deleting the probe file " + probe);
  if (io.Exists(probe)) {
    return Status::IOError("the probe file " + probe + " is still there after its deletion");
  }
  return Status::OK();
}

}  // namespace ferry::lake
