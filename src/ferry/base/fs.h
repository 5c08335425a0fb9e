// Local file helpers with the durability the protocol needs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/status.h"

namespace ferry {

Result<std::string> ReadFile(const std::string& path);

// Replaces `path` with `data` so that a reader (or a crash at any instant) sees either the old
// file or the new one, never a mix: write `path.tmp-<pid>`, fsync it, rename over `path`, fsync
// the folder. `fault_after_temp` names a fault point hit between the temp write and the rename.
// The temporary file is created anew (O_EXCL, O_NOFOLLOW): a link in its place is never followed.
Status WriteFileAtomic(const std::string& path, std::string_view data,
                       std::string_view fault_after_temp = {});

// Removes the temporary files WriteFileAtomic(path) left behind (a process killed between the
// write and the rename): `<path>.tmp-<digits>` in its folder, nothing else. The caller makes
// sure no other process writes `path` at the same time. Returns how many were removed.
Result<int> RemoveAtomicTemporaries(const std::string& path);

// Writes a new file that must not exist yet (O_EXCL), fsyncs it. kAlreadyExists if it exists.
Status WriteNewFile(const std::string& path, std::string_view data);

// Renames `from` to `to` only if `to` does not exist (atomically: no reader sees a mix, no
// existing file is replaced). kAlreadyExists when it exists.
Status RenameNoReplace(const std::string& from, const std::string& to);

Status MakeDirs(const std::string& path);
Status FsyncDir(const std::string& dir);
// Makes the files at `paths` (written and closed without a sync) durable, with their entries in
// their folders. Files of one file system that are many (kSyncFilesystemFrom or more) are made
// durable by one syncfs(2) of that file system: one flush of everything in bulk, which costs a
// fraction of one fsync per file and folder (a table with thousands of partitions writes
// thousands of small files per commit); fewer files get an fsync each, and their folders one.
inline constexpr size_t kSyncFilesystemFrom = 64;
Status SyncFiles(const std::vector<std::string>& paths);
bool FileExists(const std::string& path);
Result<uint64_t> FileSize(const std::string& path);
Status RemoveFile(const std::string& path);
std::string ParentDir(const std::string& path);
std::string JoinPath(std::string_view a, std::string_view b);
// Makes `path` absolute against the current directory and removes "." segments.
std::string AbsolutePath(const std::string& path);

// An append-only file written through a buffer; Sync() makes it durable.
class WritableFile {
 public:
  static Result<WritableFile> Create(const std::string& path);  // fails if it exists
  WritableFile(WritableFile&& o) noexcept;
  WritableFile& operator=(WritableFile&& o) noexcept;
  WritableFile(const WritableFile&) = delete;
  WritableFile& operator=(const WritableFile&) = delete;
  ~WritableFile();

  Status Append(std::string_view data);
  Status Sync();
  Status Close();          // flushes, fsyncs, closes
  Status CloseUnsynced();  // flushes and closes; durable only after a sync (SyncFiles)
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  WritableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Status FlushBuffer();
  Status CloseSyncing(bool sync);
  int fd_ = -1;
  std::string path_;
  std::string buffer_;
  uint64_t size_ = 0;
};

}  // namespace ferry
