#include "ferry/base/io.h"

namespace ferry {

Result<std::unique_ptr<OutputStream>> LocalOutputStream::Create(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(WritableFile f, WritableFile::Create(path));
  return std::unique_ptr<OutputStream>(new LocalOutputStream(std::move(f)));
}

}  // namespace ferry
