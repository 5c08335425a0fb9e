#include "ferry/base/status.h"

namespace ferry {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kAlreadyExists:
      return "already exists";
    case StatusCode::kIOError:
      return "I/O error";
    case StatusCode::kCorruption:
      return "corruption";
    case StatusCode::kNotSupported:
      return "not supported";
    case StatusCode::kCommitFailed:
      return "commit failed";
    case StatusCode::kCommitStateUnknown:
      return "commit state unknown";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kPermissionDenied:
      return "permission denied";
    case StatusCode::kCancelled:
      return "cancelled";
    case StatusCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

Status Status::WithContext(std::string_view what) const {
  if (ok()) return *this;
  std::string m(what);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(StatusCodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

}  // namespace ferry
