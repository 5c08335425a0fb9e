// Status and Result<T>: the one error type of ferry. No exceptions cross a component boundary.
//
// A code exists only where a caller reacts differently to it:
//   kInvalidArgument   bad input from the user (config, identifiers, values); fix the input.
//   kNotFound          a named thing (file, table, stream) does not exist.
//   kAlreadyExists     a create raced with another creator.
//   kIOError           the operating system refused a read or write.
//   kCorruption        stored bytes do not parse (state file, metadata, a page); never
//   auto-repaired. kNotSupported      a valid request ferry does not handle (e.g. a type it cannot
//   map). kCommitFailed      a compare-and-swap lost the race; nothing was committed; safe to
//   retry. kCommitStateUnknown the commit may or may not have landed; read the marker back, never
//   retry blindly. kUnavailable       a server could not be reached; retryable. kPermissionDenied
//   the server refused for lack of privilege. kCancelled         a stop was requested. kInternal a
//   bug in ferry.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ferry {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kIOError,
  kCorruption,
  kNotSupported,
  kCommitFailed,
  kCommitStateUnknown,
  kUnavailable,
  kPermissionDenied,
  kCancelled,
  kInternal,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status NotSupported(std::string m) { return {StatusCode::kNotSupported, std::move(m)}; }
  static Status CommitFailed(std::string m) { return {StatusCode::kCommitFailed, std::move(m)}; }
  static Status CommitStateUnknown(std::string m) {
    return {StatusCode::kCommitStateUnknown, std::move(m)};
  }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status PermissionDenied(std::string m) {
    return {StatusCode::kPermissionDenied, std::move(m)};
  }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  bool retryable() const {
    return code_ == StatusCode::kCommitFailed || code_ == StatusCode::kUnavailable;
  }

  // "what: message" — prefixes the message with what was being done.
  Status WithContext(std::string_view what) const;
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Result<T> holds a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status::Internal("Result constructed from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

namespace internal {
inline Status ToStatus(Status s) { return s; }
template <typename T>
Status ToStatus(const Result<T>& r) {
  return r.status();
}
}  // namespace internal

}  // namespace ferry

#define FERRY_CONCAT_INNER(a, b) a##b
#define FERRY_CONCAT(a, b) FERRY_CONCAT_INNER(a, b)

#define FERRY_RETURN_IF_ERROR(expr)                                  \
  do {                                                               \
    ::ferry::Status _ferry_st = ::ferry::internal::ToStatus((expr)); \
    if (!_ferry_st.ok()) return _ferry_st;                           \
  } while (0)

#define FERRY_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#define FERRY_ASSIGN_OR_RETURN(lhs, expr) \
  FERRY_ASSIGN_OR_RETURN_IMPL(FERRY_CONCAT(_ferry_r_, __LINE__), lhs, expr)
