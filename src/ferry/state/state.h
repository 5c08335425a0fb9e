// The state file: how far each stream of a pipeline got, written only after the destination has
// committed the same progress (with its marker), and read on every start to be compared with the
// destination's markers.
//
// Shape (the seed's): {"version":1, "pipeline": NAME, "type": "STREAM",
//   "streams": [{"stream": NAME, "namespace": NS, "state": {...}}]}
// ("type": "GLOBAL" is accepted on reading; ferry keeps each stream's own position, also for a
// change log shared by every stream.) A stream's "state" object is owned by its sync mode (see
// engine/progress.h for the keys each mode keeps).
//
// Writes are atomic (temp file, fsync, rename, folder fsync): after a crash the file is either
// the old or the new version. A file that does not parse is reported as kCorruption and never
// overwritten, so that nothing is lost; the message says how to recover.
//
// Thread-safety: StateStore implementations are safe to call from several threads.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ferry/base/status.h"

namespace ferry::state {

using Json = nlohmann::json;

class PipelineState {
 public:
  PipelineState() = default;
  explicit PipelineState(std::string pipeline);

  static Result<PipelineState> FromJson(const Json& doc, const std::string& origin);
  Json ToJson() const { return doc_; }

  const std::string& pipeline() const { return pipeline_; }
  // The "state" object of a stream; null when the stream has none yet.
  Json Stream(const std::string& ns, const std::string& stream) const;
  void SetStream(const std::string& ns, const std::string& stream, Json state);
  void RemoveStream(const std::string& ns, const std::string& stream);
  std::vector<std::pair<std::string, std::string>> Streams() const;  // (namespace, stream)

 private:
  std::string pipeline_;
  Json doc_;
};

// Where the state lives. A local file now; a row in the catalog database or an object beside
// the tables later, so that workers on several machines can share it.
class StateStore {
 public:
  virtual ~StateStore() = default;
  // nullopt when no state was ever saved. kCorruption when it exists but cannot be parsed.
  virtual Result<std::optional<PipelineState>> Load() = 0;
  virtual Status Save(const PipelineState& state) = 0;
  virtual std::string Describe() const = 0;
};

std::unique_ptr<StateStore> OpenFileStateStore(std::string path);

// Held while a sync of a pipeline runs, so that a second sync of it at once (an overlapping cron
// run, a second terminal) is refused instead of racing the first for the same tables: an
// exclusive lock (flock) on `<state file>.lock`, which holds who has it and is removed when the
// sync ends. The kernel lets go of it when the process ends however it ends (a crash, SIGKILL):
// a file left behind then is no lock, and never blocks a restart. kAlreadyExists when another
// process holds it, naming its pid, host and start time; kIOError (kPermissionDenied for a folder
// ferry may not write) when the file cannot be opened.
class PipelineLock {
 public:
  static Result<std::unique_ptr<PipelineLock>> Acquire(const std::string& state_path,
                                                       const std::string& pipeline);
  ~PipelineLock();
  PipelineLock(const PipelineLock&) = delete;
  PipelineLock& operator=(const PipelineLock&) = delete;

 private:
  PipelineLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace ferry::state
