#include "ferry/sink/iceberg/file_closer.h"

#include <utility>

#include "ferry/base/fault.h"
#include "ferry/lake/parquet_file.h"

namespace ferry::sink {

Result<lake::DataFile> FinishDataFile(lake::FileIO& io, DataFileInProgress f) {
  auto metrics = f.writer->Close();
  f.writer.reset();
  if (!metrics.ok()) {
    (void)io.Delete(f.uri);
    return metrics.status().WithContext("closing data file " + f.uri);
  }
  lake::DataFile file = lake::DataFileOf(f.uri, *metrics);
  file.spec_id = f.spec_id;
  file.partition = std::move(f.partition);
  return file;
}

FileCloser::FileCloser(lake::FileIO* io, uint64_t max_queued_bytes)
    : io_(io), max_queued_bytes_(max_queued_bytes) {}

FileCloser::~FileCloser() {
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    dropped.swap(queue_);
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  // `dropped` goes here, outside the lock: each writer's stream removes its unfinished file.
}

uint64_t FileCloser::queued_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_bytes_;
}

Status FileCloser::Submit(DataFileInProgress f) {
  const uint64_t buffered = f.writer->BufferedMemoryBytes();
  const uint64_t rows = f.writer->rows_written();
  const uint64_t bytes = f.writer->EstimatedSize();
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] {
      return !failed_.ok() || queued_bytes_ == 0 || queued_bytes_ + buffered <= max_queued_bytes_;
    });
    // Not taken: the writer goes unclosed, and its stream leaves nothing behind.
    if (!failed_.ok()) return failed_;
    queue_.push_back(Job{std::move(f), buffered});
    queued_bytes_ += buffered;
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  changed_.notify_all();
  rows_ += rows;
  bytes_ += bytes;
  return Status::OK();
}

Status FileCloser::Wait(std::vector<lake::DataFile>* out) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
  for (auto& f : closed_) out->push_back(std::move(f));
  closed_.clear();
  rows_ = bytes_ = 0;
  Status s = failed_;
  failed_ = Status::OK();
  return s;
}

void FileCloser::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    FaultPoint("sink.closing_file");
    auto file = FinishDataFile(*io_, std::move(job.file));
    lock.lock();
    busy_ = false;
    queued_bytes_ -= job.buffered;
    if (file.ok()) {
      closed_.push_back(std::move(*file));
    } else if (failed_.ok()) {
      failed_ = file.status();
    }
    changed_.notify_all();
  }
}

}  // namespace ferry::sink
