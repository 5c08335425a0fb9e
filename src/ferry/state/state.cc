#include "ferry/state/state.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "ferry/base/fault.h"
#include "ferry/base/fs.h"
#include "ferry/base/log.h"

namespace ferry::state {

PipelineState::PipelineState(std::string pipeline) : pipeline_(std::move(pipeline)) {
  doc_ =
      Json{{"version", 1}, {"pipeline", pipeline_}, {"type", "STREAM"}, {"streams", Json::array()}};
}

Result<PipelineState> PipelineState::FromJson(const Json& doc, const std::string& origin) {
  auto bad = [&](const std::string& what) {
    return Status::Corruption("state " + origin + " is not a ferry state file: " + what +
                              ". Move it away to start over; ferry then rebuilds progress from "
                              "the destination's markers where they exist");
  };
  if (!doc.is_object()) return bad("the top level is not an object");
  if (!doc.contains("version") || !doc["version"].is_number_integer()) return bad("no version");
  if (doc["version"].get<int>() != 1) {
    return Status::NotSupported("state " + origin + " has version " + doc["version"].dump() +
                                "; this ferry reads version 1");
  }
  if (!doc.contains("pipeline") || !doc["pipeline"].is_string()) return bad("no pipeline name");
  if (!doc.contains("streams") || !doc["streams"].is_array()) return bad("no streams list");
  for (const auto& s : doc["streams"]) {
    if (!s.is_object() || !s.contains("stream") || !s["stream"].is_string() ||
        !s.contains("namespace") || !s["namespace"].is_string() || !s.contains("state") ||
        !s["state"].is_object()) {
      return bad("a stream entry lacks stream/namespace/state");
    }
  }
  if (doc.contains("type") && doc["type"] != "STREAM" && doc["type"] != "GLOBAL") {
    return bad("type is neither STREAM nor GLOBAL");
  }
  PipelineState st;
  st.pipeline_ = doc["pipeline"].get<std::string>();
  st.doc_ = doc;
  return st;
}

Json PipelineState::Stream(const std::string& ns, const std::string& stream) const {
  for (const auto& s : doc_["streams"]) {
    if (s["namespace"] == ns && s["stream"] == stream) return s["state"];
  }
  return nullptr;
}

void PipelineState::SetStream(const std::string& ns, const std::string& stream, Json state) {
  for (auto& s : doc_["streams"]) {
    if (s["namespace"] == ns && s["stream"] == stream) {
      s["state"] = std::move(state);
      return;
    }
  }
  doc_["streams"].push_back(
      Json{{"stream", stream}, {"namespace", ns}, {"state", std::move(state)}});
}

void PipelineState::RemoveStream(const std::string& ns, const std::string& stream) {
  auto& arr = doc_["streams"];
  for (auto it = arr.begin(); it != arr.end(); ++it) {
    if ((*it)["namespace"] == ns && (*it)["stream"] == stream) {
      arr.erase(it);
      return;
    }
  }
}

std::vector<std::pair<std::string, std::string>> PipelineState::Streams() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& s : doc_["streams"]) out.emplace_back(s["namespace"], s["stream"]);
  return out;
}

namespace {

class FileStateStore final : public StateStore {
 public:
  explicit FileStateStore(std::string path) : path_(std::move(path)) {}

  Result<std::optional<PipelineState>> Load() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!FileExists(path_)) return std::optional<PipelineState>();
    FERRY_ASSIGN_OR_RETURN(std::string text, ReadFile(path_));
    Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      return Status::Corruption("state file " + path_ +
                                " is not valid JSON (torn or edited by hand). It was left as it "
                                "is; move it away to start over, and ferry rebuilds progress from "
                                "the destination's markers where they exist");
    }
    FERRY_ASSIGN_OR_RETURN(PipelineState st, PipelineState::FromJson(doc, "file " + path_));
    return std::optional<PipelineState>(std::move(st));
  }

  Status Save(const PipelineState& state) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_RETURN_IF_ERROR(MakeDirs(ParentDir(path_)));
    std::string text = state.ToJson().dump(2) + "\n";
    return WriteFileAtomic(path_, text, "state.temp_written");
  }

  std::string Describe() const override { return "file " + path_; }

 private:
  std::mutex mu_;
  std::string path_;
};

}  // namespace

std::unique_ptr<StateStore> OpenFileStateStore(std::string path) {
  return std::make_unique<FileStateStore>(std::move(path));
}

Result<std::unique_ptr<PipelineLock>> PipelineLock::Acquire(const std::string& state_path,
                                                            const std::string& pipeline) {
  const std::string path = state_path + ".lock";
  FERRY_RETURN_IF_ERROR(MakeDirs(ParentDir(path)));
  // The holder removes the file when it lets go; a file locked after its holder removed it is
  // not the lock any more, so the lock is the file that still has the name once locked.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int err = errno;
      std::string m = "cannot open the lock file " + path + " of pipeline '" + pipeline +
                      "': " + std::strerror(err);
      if (err == EACCES || err == EPERM || err == EROFS) {
        return Status::PermissionDenied(m +
                                        "; the folder of the state file must be writable "
                                        "by the user running ferry (uid " +
                                        std::to_string(::getuid()) + ")");
      }
      return Status::IOError(m);
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      std::string holder(512, '\0');
      const ssize_t n = ::pread(fd, holder.data(), holder.size(), 0);
      ::close(fd);
      if (err != EWOULDBLOCK) {
        return Status::IOError("cannot lock " + path + ": " + std::strerror(err));
      }
      holder.resize(n > 0 ? static_cast<size_t>(n) : 0);
      Json who = Json::parse(holder, nullptr, /*allow_exceptions=*/false);
      std::string by = "another process";
      if (who.is_object()) {
        by = "pid " + std::to_string(who.value("pid", int64_t{0})) + " on " +
             who.value("host", std::string("?")) + ", since " +
             who.value("since", std::string("?"));
      }
      return Status::AlreadyExists("another sync of pipeline '" + pipeline + "' is running (" + by +
                                   "; it holds " + path +
                                   "): wait for it to end, or stop it (SIGTERM) before starting "
                                   "this one");
    }
    struct stat held {
    }, named{};
    if (::fstat(fd, &held) != 0 || ::stat(path.c_str(), &named) != 0 ||
        held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
      ::close(fd);  // removed by the holder that just let go: take the new one
      continue;
    }
    std::unique_ptr<PipelineLock> lock(new PipelineLock(fd, path));
    char host[256] = "?";
    ::gethostname(host, sizeof host - 1);
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    char since[32];
    std::strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const std::string text =
        Json{{"pid", static_cast<int64_t>(::getpid())}, {"host", host}, {"since", since}}.dump() +
        "\n";
    // Who holds it, for the message a second sync prints; the lock itself is the flock.
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
      return Status::IOError("cannot write " + path + ": " + std::strerror(errno));
    }
    // Held: no other sync writes the state file now, so a temporary one beside it is a killed
    // process's, never to be renamed.
    auto removed = RemoveAtomicTemporaries(state_path);
    if (!removed.ok()) {
      FERRY_LOG(kWarn) << "could not remove stale temporary state files: "
                       << removed.status().message();
    } else if (*removed > 0) {
      FERRY_LOG(kDebug) << "removed " << *removed << " temporary state file(s) of a killed sync";
    }
    return lock;
  }
  return Status::IOError("cannot lock " + path + ": it kept being replaced while locking it");
}

PipelineLock::~PipelineLock() {
  // Removed while still locked, so no other process can lock this file in between (one that
  // opened it before finds, once locked, that the name is gone or another file's).
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace ferry::state
