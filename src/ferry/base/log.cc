#include "ferry/base/log.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "ferry/base/log_setup.h"

namespace ferry {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};
std::mutex g_mu;
std::string g_pipeline;  // set before logging starts
std::string g_status;    // the terminal's status line, guarded by g_mu

// The length of the UTF-8 sequence starting s[i], or 0 when it is not one.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return n;
}
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }
void SetLogFormat(LogFormat format) { g_format.store(static_cast<int>(format)); }
LogFormat GetLogFormat() { return static_cast<LogFormat>(g_format.load()); }
void SetLogPipeline(std::string pipeline) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_pipeline = std::move(pipeline);
}

std::string JsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : buf;
      ++i;
    } else if (size_t n = Utf8Length(s, i); n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  return out;
}

void LogLine(LogLevel level, std::string_view message) {
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error"};
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[40];
  const size_t n = std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(ts + n, sizeof ts - n, ".%03dZ", static_cast<int>(ms));
  const char* name = kNames[static_cast<int>(level)];
  if (GetLogFormat() == LogFormat::kJson) {
    std::string line = std::string("{\"time\":\"") + ts + "\",\"level\":\"" + name + "\"";
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_pipeline.empty()) line += ",\"pipeline\":\"" + JsonEscape(g_pipeline) + "\"";
    line += ",\"message\":\"" + JsonEscape(message) + "\"}\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    return;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_status.empty()) std::fputs("\r\033[K", stderr);
  std::fprintf(stderr, "%s %-5s %.*s\n", ts, name, static_cast<int>(message.size()),
               message.data());
  if (!g_status.empty()) std::fputs(g_status.c_str(), stderr);
  std::fflush(stderr);
}

void SetStatusLine(std::string line) {
  // One row of the terminal: a longer line would wrap, and only its last row be redrawn.
  winsize ws{};
  const size_t width = ::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1
                           ? static_cast<size_t>(ws.ws_col) - 1
                           : 79;
  size_t chars = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xC0) == 0x80) continue;  // inside a character
    if (++chars > width) {
      line.resize(i);
      break;
    }
  }
  std::lock_guard<std::mutex> lock(g_mu);
  if (line.empty() && g_status.empty()) return;
  g_status = std::move(line);
  std::fputs("\r\033[K", stderr);
  std::fputs(g_status.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace ferry
