// FileIO: where table files live. Locations in Iceberg metadata are URIs; LocalFileIO serves
// "file:///abs/path" (and bare absolute paths). An S3 implementation will serve "s3://bucket/key"
// behind the same interface.
// Thread-safety: implementations are safe to share between threads.
#pragma once

#include <memory>
#include <string>

#include "ferry/base/io.h"
#include "ferry/base/status.h"

namespace ferry::lake {

class FileIO {
 public:
  virtual ~FileIO() = default;
  // A new file; kAlreadyExists if it is there.
  virtual Result<std::unique_ptr<OutputStream>> NewFile(const std::string& uri) = 0;
  // Writes a whole small file that must not exist yet, durably (metadata JSON, manifests).
  virtual Status WriteNew(const std::string& uri, std::string_view data) = 0;
  virtual Result<std::string> Read(const std::string& uri) = 0;
  virtual Status Delete(const std::string& uri) = 0;
  virtual bool Exists(const std::string& uri) = 0;
};

std::shared_ptr<FileIO> LocalFileIO();

// "/a/b" -> "file:///a/b"; URIs pass through.
std::string ToUri(const std::string& path_or_uri);
// "file:///a/b" -> "/a/b"; kInvalidArgument for other schemes.
Result<std::string> LocalPath(const std::string& uri);

}  // namespace ferry::lake
