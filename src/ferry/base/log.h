// Logging to stderr, one line per call, safe from any thread. Never pass secrets: the config
// layer hands out DSNs and URLs only in their redacted form (config::Redact).
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace ferry {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void LogLine(LogLevel level, std::string_view message);

namespace internal {
class LogMessage {
 public:
  explicit LogMessage(LogLevel level) : level_(level) {}
  ~LogMessage() { LogLine(level_, out_.str()); }
  std::ostringstream& stream() { return out_; }

 private:
  LogLevel level_;
  std::ostringstream out_;
};
}  // namespace internal

}  // namespace ferry

#define FERRY_LOG(level)                                   \
  if (::ferry::LogLevel::level < ::ferry::GetLogLevel()) { \
  } else                                                   \
    ::ferry::internal::LogMessage(::ferry::LogLevel::level).stream()
