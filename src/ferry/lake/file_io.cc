#include "ferry/lake/file_io.h"

#include "ferry/base/fs.h"

namespace ferry::lake {

std::string ToUri(const std::string& path_or_uri) {
  if (path_or_uri.find("://") != std::string::npos) return path_or_uri;
  return "file://" + path_or_uri;
}

Result<std::string> LocalPath(const std::string& uri) {
  if (uri.rfind("file://", 0) == 0) return uri.substr(7);
  if (uri.rfind("file:/", 0) == 0) return uri.substr(5);
  if (!uri.empty() && uri[0] == '/') return uri;
  return Status::InvalidArgument("location '" + uri +
                                 "' is not a local file; this build stores tables in local "
                                 "folders (file://)");
}

namespace {

class Local final : public FileIO {
 public:
  Result<std::unique_ptr<OutputStream>> NewFile(const std::string& uri) override {
    FERRY_ASSIGN_OR_RETURN(std::string p, LocalPath(uri));
    FERRY_RETURN_IF_ERROR(MakeDirs(ParentDir(p)));
    return LocalOutputStream::Create(p);
  }
  Status WriteNew(const std::string& uri, std::string_view data) override {
    FERRY_ASSIGN_OR_RETURN(std::string p, LocalPath(uri));
    FERRY_RETURN_IF_ERROR(MakeDirs(ParentDir(p)));
    return WriteNewFile(p, data);
  }
  Result<std::string> Read(const std::string& uri) override {
    FERRY_ASSIGN_OR_RETURN(std::string p, LocalPath(uri));
    return ReadFile(p);
  }
  Status Delete(const std::string& uri) override {
    FERRY_ASSIGN_OR_RETURN(std::string p, LocalPath(uri));
    return RemoveFile(p);
  }
  bool Exists(const std::string& uri) override {
    auto p = LocalPath(uri);
    return p.ok() && FileExists(*p);
  }
};

}  // namespace

std::shared_ptr<FileIO> LocalFileIO() {
  static std::shared_ptr<FileIO> io = std::make_shared<Local>();
  return io;
}

}  // namespace ferry::lake
