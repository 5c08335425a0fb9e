// FileCloser: finishes a stream's data files on a thread of its own. Closing a Parquet file
// compresses its last pages, writes its footer and places the file (a local rename; an object
// store's last part and the upload's completion). A table with many partitions closes thousands
// of small files in a load; done by the writing thread, that work stopped the encoding of the
// next rows each time. The writing thread hands a file over and goes on; a commit waits for them.
//
// Memory: a file handed over keeps what its writer buffers until it is closed. Submit blocks
// while the files waiting hold more than `max_queued_bytes` in all (one is always taken when
// none waits), so the writing thread runs at most that far ahead.
// Errors: a close that fails deletes its file; the error is returned by the next Submit or Wait.
// Thread-safety: Submit, Wait and the accessors are called by one thread (the stream's); the
// closes run on the closer's own thread, started at the first Submit.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/format/parquet/writer.h"
#include "ferry/lake/file_io.h"
#include "ferry/lake/manifest.h"

namespace ferry::sink {

// A data file being written: its writer, where it goes, its partition.
struct DataFileInProgress {
  std::unique_ptr<parquet::Writer> writer;
  std::string uri;
  int32_t spec_id = 0;
  lake::PartitionTuple partition;
};

// Closes the file's writer and describes the file; on failure deletes it and returns the error
// naming the file.
Result<lake::DataFile> FinishDataFile(lake::FileIO& io, DataFileInProgress f);

class FileCloser {
 public:
  FileCloser(lake::FileIO* io, uint64_t max_queued_bytes);  // `io` outlives the closer
  // Files handed over and not yet closed are dropped (their writers leave nothing behind); a
  // close under way finishes. Files closed and not collected by Wait stay where they are,
  // referenced by no table, like any file a stream wrote and did not commit.
  ~FileCloser();
  FileCloser(const FileCloser&) = delete;
  FileCloser& operator=(const FileCloser&) = delete;

  // Hands the file over to be closed. The first error of an earlier close, if any (the file is
  // then not taken: dropped unclosed, it leaves nothing behind).
  Status Submit(DataFileInProgress f);
  // Waits for every file handed over to be closed, then appends the closed files to *out in the
  // order they were handed over. The first error of any close (the files closed are appended
  // all the same, for the caller to delete).
  Status Wait(std::vector<lake::DataFile>* out);

  // The rows and bytes (size estimates when handed over) of the files handed over and not yet
  // collected by Wait.
  uint64_t rows() const { return rows_; }
  uint64_t bytes() const { return bytes_; }
  // The memory the files waiting or being closed hold (their writers' buffers when handed over).
  uint64_t queued_bytes() const;

 private:
  void Run();

  lake::FileIO* const io_;
  const uint64_t max_queued_bytes_;
  uint64_t rows_ = 0;   // the stream's thread only
  uint64_t bytes_ = 0;  // likewise

  mutable std::mutex mu_;
  std::condition_variable changed_;
  struct Job {
    DataFileInProgress file;
    uint64_t buffered = 0;
  };
  std::deque<Job> queue_;               // handed over, not yet taken by the closer
  uint64_t queued_bytes_ = 0;           // of queue_ and of the close under way
  bool busy_ = false;                   // a close is under way
  bool stop_ = false;                   // the destructor: the closer exits
  std::vector<lake::DataFile> closed_;  // in the order handed over
  Status failed_;                       // the first failed close
  std::thread thread_;
};

}  // namespace ferry::sink
