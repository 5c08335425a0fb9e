// How log lines look, set once by the command line before any work starts (not thread-safe with
// logging; set it first). Logging itself is in log.h.
//
//   text (default)  "2026-12-02T05:50:12.345Z info  orders: 1,000 rows committed"
//   json            {"time":"2026-12-02T05:50:12.345Z","level":"info","pipeline":"shop",
//                    "message":"orders: 1,000 rows committed"}   (one object per line)
//
// JSON lines are valid UTF-8 whatever the message holds (bytes that are not UTF-8 become
// U+FFFD), for log shippers (Vector, Fluent Bit, Loki's promtail) to parse without rules.
#pragma once

#include <string>
#include <string_view>

namespace ferry {

enum class LogFormat { kText, kJson };

void SetLogFormat(LogFormat format);
LogFormat GetLogFormat();
// The pipeline every JSON line names (empty: the field is left out).
void SetLogPipeline(std::string pipeline);

// A line kept at the bottom of a terminal (stderr must be one; the caller checks): drawn at once,
// taken away before each log line and drawn again below it. Empty: taken away.
void SetStatusLine(std::string line);

// `s` as the contents of a JSON string (without the quotes): quotes, backslashes and control
// characters escaped, bytes that are not UTF-8 replaced by U+FFFD.
std::string JsonEscape(std::string_view s);

}  // namespace ferry
