#include "ferry/base/io.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace ferry {
namespace {

class LocalFile final : public RandomAccessFile {
 public:
  LocalFile(int fd, uint64_t size, std::string path)
      : fd_(fd), size_(size), path_(std::move(path)) {}
  ~LocalFile() override { ::close(fd_); }
  LocalFile(const LocalFile&) = delete;
  LocalFile& operator=(const LocalFile&) = delete;

  uint64_t size() const override { return size_; }
  const std::string& name() const override { return path_; }
  Status ReadAt(uint64_t offset, uint64_t n, std::string* out) override {
    if (offset > size_ || n > size_ - offset) {
      return Status::Corruption("file " + path_ + ": a read of " + std::to_string(n) +
                                " bytes at offset " + std::to_string(offset) +
                                " runs past its end (" + std::to_string(size_) + " bytes)");
    }
    out->resize(static_cast<size_t>(n));
    uint64_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, out->data() + done, static_cast<size_t>(n - done),
                          static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::IOError("reading " + path_ + ": " + std::strerror(errno));
      if (r == 0) return Status::IOError("reading " + path_ + ": the file shrank while being read");
      done += static_cast<uint64_t>(r);
    }
    return Status::OK();
  }

 private:
  int fd_;
  uint64_t size_;
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<RandomAccessFile>> OpenLocalFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string msg = "opening " + path + ": " + std::strerror(err);
    return err == ENOENT ? Status::NotFound(msg) : Status::IOError(msg);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string msg = "stat " + path + ": " + std::strerror(errno);
    ::close(fd);
    return Status::IOError(msg);
  }
  return std::unique_ptr<RandomAccessFile>(
      new LocalFile(fd, static_cast<uint64_t>(st.st_size), path));
}

Result<std::unique_ptr<OutputStream>> LocalOutputStream::Create(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(WritableFile f, WritableFile::Create(path));
  return std::unique_ptr<OutputStream>(new LocalOutputStream(std::move(f)));
}

}  // namespace ferry
