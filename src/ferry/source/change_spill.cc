#include "ferry/source/change_spill.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <queue>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"

namespace ferry::source {
namespace {

constexpr char kMagic[8] = {'F', 'S', 'P', 'I', 'L', 'L', '1', '\n'};
constexpr size_t kWriteBuffer = size_t{1} << 20;
constexpr size_t kReadBuffer = size_t{256} << 10;
// An entry's fixed part: table, key length, seq, record length; its checksum after the bytes.
constexpr size_t kHead = 4 + 4 + 8 + 4;

void Put32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void Put64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }
uint32_t Get32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t Get64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::string Errno(int e) { return std::strerror(e); }

// One run read front to back, one entry at a time.
class RunReader {
 public:
  RunReader(int run, std::string path, uint64_t rank)
      : run_(run), path_(std::move(path)), rank_(rank) {}
  ~RunReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  RunReader(const RunReader&) = delete;
  RunReader& operator=(const RunReader&) = delete;

  Status Open() {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return Status::IOError("opening spill file " + path_ + ": " + Errno(errno));
    FERRY_RETURN_IF_ERROR(Fill(sizeof kMagic));
    if (end_ - pos_ < sizeof kMagic || std::memcmp(buf_.data() + pos_, kMagic, sizeof kMagic)) {
      return Status::Corruption("spill file " + path_ + " does not start as one ferry wrote");
    }
    pos_ += sizeof kMagic;
    return Next();
  }

  // Reads the next entry into `entry` (done() once there is none).
  Status Next() {
    FERRY_RETURN_IF_ERROR(Fill(kHead));
    if (end_ == pos_) {
      done_ = true;
      return Status::OK();
    }
    if (end_ - pos_ < kHead) return Truncated();
    const char* p = buf_.data() + pos_;
    const uint32_t key_len = Get32(p + 4);
    const uint32_t rec_len = Get32(p + 16);
    const size_t total = kHead + size_t{key_len} + rec_len + 4;
    FERRY_RETURN_IF_ERROR(Fill(total));
    if (end_ - pos_ < total) return Truncated();
    p = buf_.data() + pos_;
    const uint32_t crc = Get32(p + total - 4);
    if (crc32(0, reinterpret_cast<const Bytef*>(p), static_cast<uInt>(total - 4)) != crc) {
      return Status::Corruption("spill file " + path_ + ": an entry's checksum does not match");
    }
    entry_.table = Get32(p);
    entry_.seq = Get64(p + 8);
    // The fixed part is table, key length, seq, record length; the key follows it.
    entry_.key = std::string_view(p + kHead, key_len);
    entry_.record = std::string_view(p + kHead + key_len, rec_len);
    pos_ += total;
    return Status::OK();
  }

  bool done() const { return done_; }
  int run() const { return run_; }
  uint64_t rank() const { return rank_; }
  const ChangeSpill::Entry& entry() const { return entry_; }

 private:
  // Makes at least `n` bytes available from pos_ (fewer at the file's end). Views into the
  // buffer stay valid until the next call.
  Status Fill(size_t n) {
    if (end_ - pos_ >= n) return Status::OK();
    // The entry handed out last is no longer needed: move the rest to the front.
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
    if (buf_.size() < std::max(n, kReadBuffer)) buf_.resize(std::max(n, kReadBuffer));
    while (end_ < n) {
      const ssize_t got = ::read(fd_, buf_.data() + end_, buf_.size() - end_);
      if (got < 0) {
        if (errno == EINTR) continue;
        return Status::IOError("reading spill file " + path_ + ": " + Errno(errno));
      }
      if (got == 0) break;
      end_ += static_cast<size_t>(got);
    }
    return Status::OK();
  }
  Status Truncated() const {
    return Status::Corruption("spill file " + path_ + " ends inside an entry");
  }

  int run_;
  std::string path_;
  uint64_t rank_ = 0;
  int fd_ = -1;
  std::string buf_;
  size_t pos_ = 0, end_ = 0;
  bool done_ = false;
  ChangeSpill::Entry entry_;
};

}  // namespace

ChangeSpill::ChangeSpill(std::string dir, std::string setting)
    : dir_(std::move(dir)), setting_(std::move(setting)) {}

ChangeSpill::~ChangeSpill() {
  for (const auto& [id, run] : runs_) ::unlink(Path(id).c_str());
}

std::string ChangeSpill::Path(int id) const {
  return dir_ + "/ferry-spill-" + std::to_string(::getpid()) + "-" + std::to_string(id) + ".run";
}

Result<int> ChangeSpill::WriteRun(const std::vector<Entry>& sorted) {
  const int id = next_++;
  const std::string path = Path(id);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::IOError("cannot create a spill file in " + dir_ + " (" + setting_ +
                           "): " + Errno(errno));
  }
  uint64_t written = 0;
  std::string buf;
  buf.reserve(kWriteBuffer + 4096);
  buf.append(kMagic, sizeof kMagic);
  auto flush = [&]() -> Status {
    size_t off = 0;
    while (off < buf.size()) {
      const ssize_t n = ::write(fd, buf.data() + off, buf.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        const int e = errno;
        return Status::IOError(
            "writing held changes to " + dir_ + " (" + setting_ + "): " + Errno(e) +
            (e == ENOSPC ? "; the disk is full: free space there, point " + setting_ +
                               " at a larger disk, or raise memory_limit"
                         : std::string()));
      }
      off += static_cast<size_t>(n);
    }
    written += buf.size();
    buf.clear();
    return Status::OK();
  };
  Status s;
  for (const Entry& e : sorted) {
    const size_t start = buf.size();
    Put32(&buf, e.table);
    Put32(&buf, static_cast<uint32_t>(e.key.size()));
    Put64(&buf, e.seq);
    Put32(&buf, static_cast<uint32_t>(e.record.size()));
    buf.append(e.key);
    buf.append(e.record);
    Put32(&buf, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(buf.data() + start),
                                            static_cast<uInt>(buf.size() - start))));
    if (buf.size() >= kWriteBuffer) {
      s = flush();
      if (!s.ok()) break;
    }
  }
  if (s.ok()) s = flush();
  // Killed here, the run is on disk and nothing of it was merged: the next sync reads the
  // changes from the log again and removes the file.
  if (s.ok()) FaultPoint("source.spilling");
  ::close(fd);
  if (!s.ok()) {
    ::unlink(path.c_str());
    return s;
  }
  runs_[id] = Run{written, 0};
  disk_bytes_ += written;
  return id;
}

void ChangeSpill::DropRun(int id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  disk_bytes_ -= std::min(disk_bytes_, it->second.bytes);
  runs_.erase(it);
  ::unlink(Path(id).c_str());
}

Status ChangeSpill::Merge(const std::vector<int>& ids,
                          const std::function<bool(int run, uint32_t table)>& skip,
                          const std::function<Status(const Entry&)>& each) {
  std::vector<std::unique_ptr<RunReader>> readers;
  for (int id : ids) {
    auto known = runs_.find(id);
    auto r =
        std::make_unique<RunReader>(id, Path(id), known == runs_.end() ? 0 : known->second.rank);
    FERRY_RETURN_IF_ERROR(r->Open());
    if (!r->done()) readers.push_back(std::move(r));
  }
  // The smallest (table, key) first; among equal ones, the highest rank, then seq, first.
  auto later = [](const RunReader* a, const RunReader* b) {
    const Entry& x = a->entry();
    const Entry& y = b->entry();
    if (x.table != y.table) return x.table > y.table;
    if (x.key != y.key) return x.key > y.key;
    if (a->rank() != b->rank()) return a->rank() < b->rank();
    return x.seq < y.seq;
  };
  std::priority_queue<RunReader*, std::vector<RunReader*>, decltype(later)> heap(later);
  for (auto& r : readers) heap.push(r.get());
  std::string key;  // the (table, key) whose entry went out, or is being looked for
  uint32_t table = 0;
  bool have = false, sent = false;
  uint64_t merged = 0;
  while (!heap.empty()) {
    RunReader* r = heap.top();
    heap.pop();
    const Entry& e = r->entry();
    if (!have || e.table != table || e.key != key) {
      table = e.table;
      key.assign(e.key);
      have = true;
      sent = false;
    }
    if (!sent && !skip(r->run(), e.table)) {
      Entry from = e;
      from.run = r->run();
      FERRY_RETURN_IF_ERROR(each(from));
      sent = true;
      if ((++merged & 1023) == 0) FaultPoint("source.reading_spill");
    }
    FERRY_RETURN_IF_ERROR(r->Next());
    if (!r->done()) heap.push(r);
  }
  return Status::OK();
}

void ChangeSpill::Announce(size_t memory_limit) {
  if (announced_) return;
  announced_ = true;
  FERRY_LOG(kInfo) << "held changes past memory_limit (" << (memory_limit >> 20)
                   << " MiB): spilling them to " << dir_;
}

Status ChangeSpill::ReadBack(const std::vector<int>& ids,
                             const std::function<bool(int run, uint32_t table)>& skip,
                             const std::function<Status(const Entry&)>& each) {
  FERRY_LOG(kInfo) << "read back " << ids.size() << " spill file(s), " << (disk_bytes_ >> 20)
                   << " MiB, merged by key";
  announced_ = false;
  FERRY_RETURN_IF_ERROR(Merge(ids, skip, each));
  for (int id : ids) DropRun(id);
  return Status::OK();
}

int ChangeSpill::RemoveLeftovers(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    constexpr std::string_view kPrefix = "ferry-spill-";
    if (name.rfind(kPrefix, 0) != 0 || name.size() < 5 ||
        name.compare(name.size() - 4, 4, ".run") != 0) {
      continue;
    }
    const long pid = std::strtol(name.c_str() + kPrefix.size(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;  // still running
    if (::unlink((dir + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace ferry::source
