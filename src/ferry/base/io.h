// OutputStream: where a file writer sends its bytes. Local files now; object stores (S3) later
// implement the same interface, so format writers never know where their bytes go.
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
  // Makes every byte durable and closes. After Close() succeeds the file is complete.
  virtual Status Close() = 0;
  // Bytes appended so far.
  virtual uint64_t Tell() const = 0;
};

// An OutputStream over a new local file (it must not exist yet).
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
