#include "ferry/base/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "ferry/base/fault.h"

namespace ferry {
namespace {

Status Errno(std::string_view what, const std::string& path) {
  int e = errno;
  std::string m(what);
  m += " '" + path + "': " + std::strerror(e);
  if (e == ENOENT) return Status::NotFound(m);
  if (e == EACCES || e == EPERM) return Status::PermissionDenied(m);
  if (e == EEXIST) return Status::AlreadyExists(m);
  return Status::IOError(m);
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write", path);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return Status::OK();
}

}  // namespace

Result<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = Errno("cannot read", path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string ParentDir(const std::string& path) {
  auto p = std::filesystem::path(path).parent_path().string();
  return p.empty() ? "." : p;
}

std::string JoinPath(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  std::string out(a);
  if (out.back() != '/') out += '/';
  out += b;
  return out;
}

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::absolute(path, ec);
  if (ec) return path;
  return p.lexically_normal().string();
}

namespace {
// Opens `path` read-only (`flags` added), calls `sync` (fsync, syncfs) on it and closes it.
Status SyncPath(const std::string& path, int flags, int (*sync)(int), std::string_view what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
  if (fd < 0) return Errno("cannot open", path);
  int rc = sync(fd);
  Status s = rc == 0 ? Status::OK() : Errno(what, path);
  ::close(fd);
  return s;
}
}  // namespace

Status FsyncDir(const std::string& dir) {
  return SyncPath(dir, O_DIRECTORY, ::fsync, "cannot fsync folder");
}

Status SyncFiles(const std::vector<std::string>& paths) {
  // The files grouped by file system; a group of many is synced whole.
  std::map<dev_t, std::vector<const std::string*>> by_device;
  for (const std::string& p : paths) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) return Errno("cannot stat", p);
    by_device[st.st_dev].push_back(&p);
  }
  for (const auto& [device, files] : by_device) {
    if (files.size() >= kSyncFilesystemFrom) {
      // Since Linux 5.8 syncfs reports the file system's writeback errors since the open.
      FERRY_RETURN_IF_ERROR(
          SyncPath(*files.front(), 0, ::syncfs, "cannot sync the file system of"));
      continue;
    }
    std::set<std::string> folders;
    for (const std::string* p : files) {
      FERRY_RETURN_IF_ERROR(SyncPath(*p, 0, ::fsync, "cannot fsync"));
      folders.insert(ParentDir(*p));
    }
    for (const std::string& f : folders) FERRY_RETURN_IF_ERROR(FsyncDir(f));
  }
  return Status::OK();
}

Status WriteFileAtomic(const std::string& path, std::string_view data,
                       std::string_view fault_after_temp) {
  std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  // A new file of our own: never one that is there (a link planted under the name, or a
  // process of the same pid that died before renaming, whose file goes first).
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0) {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  }
  if (fd < 0) return Errno("cannot create", tmp);
  Status s = WriteAll(fd, data, tmp);
  if (s.ok() && ::fsync(fd) != 0) s = Errno("cannot fsync", tmp);
  ::close(fd);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  if (!fault_after_temp.empty()) FaultPoint(fault_after_temp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status r = Errno("cannot rename into place", path);
    ::unlink(tmp.c_str());
    return r;
  }
  return FsyncDir(ParentDir(path));
}

Result<int> RemoveAtomicTemporaries(const std::string& path) {
  const std::string dir = ParentDir(path);
  const std::string prefix = path.substr(path.rfind('/') + 1) + ".tmp-";
  DIR* d = ::opendir(dir.empty() ? "." : dir.c_str());
  if (d == nullptr) return errno == ENOENT ? 0 : Result<int>(Errno("cannot list", dir));
  int removed = 0;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    // Only ferry's own names: <file>.tmp-<pid>.
    if (name.find_first_not_of("0123456789", prefix.size()) != std::string::npos) continue;
    if (::unlinkat(::dirfd(d), name.c_str(), 0) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

Status WriteNewFile(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", path);
  Status s = WriteAll(fd, data, path);
  if (s.ok() && ::fsync(fd) != 0) s = Errno("cannot fsync", path);
  ::close(fd);
  if (!s.ok()) ::unlink(path.c_str());
  return s;
}

Status RenameNoReplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
    return Status::OK();
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
    return Errno("cannot rename into place", to);
  }
  // A file system without RENAME_NOREPLACE: a hard link fails just as atomically when `to`
  // exists; then the temporary name goes.
  if (::link(from.c_str(), to.c_str()) != 0) return Errno("cannot rename into place", to);
  if (::unlink(from.c_str()) != 0) return Errno("cannot remove", from);
  return Status::OK();
}

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Status::IOError("cannot create folder '" + path + "': " + ec.message());
  return Status::OK();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Result<uint64_t> FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Errno("cannot stat", path);
  return static_cast<uint64_t>(st.st_size);
}

Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("cannot remove", path);
  return Status::OK();
}

Result<WritableFile> WritableFile::Create(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", path);
  return WritableFile(fd, path);
}

WritableFile::WritableFile(WritableFile&& o) noexcept
    : fd_(o.fd_), path_(std::move(o.path_)), buffer_(std::move(o.buffer_)), size_(o.size_) {
  o.fd_ = -1;
}

WritableFile& WritableFile::operator=(WritableFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    buffer_ = std::move(o.buffer_);
    size_ = o.size_;
    o.fd_ = -1;
  }
  return *this;
}

WritableFile::~WritableFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status WritableFile::Append(std::string_view data) {
  size_ += data.size();
  constexpr size_t kBufferBytes = 1 << 20;
  if (buffer_.size() + data.size() > kBufferBytes) {
    FERRY_RETURN_IF_ERROR(FlushBuffer());
    if (data.size() >= kBufferBytes) return WriteAll(fd_, data, path_);
  }
  buffer_.append(data);
  return Status::OK();
}

Status WritableFile::FlushBuffer() {
  if (buffer_.empty()) return Status::OK();
  Status s = WriteAll(fd_, buffer_, path_);
  buffer_.clear();
  return s;
}

Status WritableFile::Sync() {
  FERRY_RETURN_IF_ERROR(FlushBuffer());
  if (::fsync(fd_) != 0) return Errno("cannot fsync", path_);
  return Status::OK();
}

Status WritableFile::Close() { return CloseSyncing(true); }

Status WritableFile::CloseUnsynced() { return CloseSyncing(false); }

Status WritableFile::CloseSyncing(bool sync) {
  if (fd_ < 0) return Status::OK();
  Status s = sync ? Sync() : FlushBuffer();
  ::close(fd_);
  fd_ = -1;
  return s;
}

}  // namespace ferry
