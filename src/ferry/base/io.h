// OutputStream and RandomAccessFile: where file writers send their bytes and where file readers
// read them. Format writers and readers (Parquet, Avro) see only these, never a path: a
// warehouse's files are opened through lake::FileIO, which picks the storage (local folders now,
// object stores next) and hands out these streams. The local implementations here are the
// building blocks of the local FileIO and of tools that write a file they name themselves.
// Thread-safety: a stream or file is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ferry/base/fs.h"
#include "ferry/base/status.h"

namespace ferry {

class OutputStream {
 public:
  virtual ~OutputStream() = default;
  virtual Status Append(std::string_view data) = 0;
  // Stores every byte and closes: after Close() succeeds the file is complete (and durable,
  // unless its maker says otherwise: lake::FileIO::Durability).
  virtual Status Close() = 0;
  // Bytes appended so far.
  virtual uint64_t Tell() const = 0;
  // Heap bytes held for appended bytes not yet stored (an object store's parts), for memory
  // accounting.
  virtual uint64_t BufferedBytes() const { return 0; }
};

// Random access to a file of known size: reads by range, as an object store serves them.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  virtual uint64_t size() const = 0;
  // Replaces *out with the n bytes at offset. kCorruption if they run past the end of the file,
  // kIOError if the storage refuses the read.
  virtual Status ReadAt(uint64_t offset, uint64_t n, std::string* out) = 0;
  // What error messages call the file (its path or location).
  virtual const std::string& name() const = 0;
};

// A local file opened for reading; kNotFound / kIOError when it cannot be opened.
Result<std::unique_ptr<RandomAccessFile>> OpenLocalFile(const std::string& path);

// An OutputStream over a new local file (it must not exist yet); the file is visible, growing,
// from the start: lake::FileIO's local implementation adds the atomic put on top.
class LocalOutputStream final : public OutputStream {
 public:
  static Result<std::unique_ptr<OutputStream>> Create(const std::string& path);
  Status Append(std::string_view data) override { return file_.Append(data); }
  Status Close() override { return file_.Close(); }
  uint64_t Tell() const override { return file_.size(); }

 private:
  explicit LocalOutputStream(WritableFile f) : file_(std::move(f)) {}
  WritableFile file_;
};

// An OutputStream into memory, for tests and small files built before they are stored.
class StringOutputStream final : public OutputStream {
 public:
  Status Append(std::string_view data) override {
    out_.append(data);
    return Status::OK();
  }
  Status Close() override { return Status::OK(); }
  uint64_t Tell() const override { return out_.size(); }
  const std::string& str() const { return out_; }
  std::string Release() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace ferry
