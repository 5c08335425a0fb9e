#include <gtest/gtest.h>

#include "ferry/base/log.h"
#include "ferry/base/log_setup.h"

namespace ferry {
namespace {

TEST(JsonEscapeTest, AnyMessageBecomesValidJsonText) {
  EXPECT_EQ(JsonEscape("plain"), "plain");
  EXPECT_EQ(JsonEscape("a \"quoted\" \\ path"), "a \\\"quoted\\\" \\\\ path");
  EXPECT_EQ(JsonEscape("two\nlines\tand\x01"), "two\\nlines\\tand\\u0001");
  // UTF-8 passes as it is; bytes that are not UTF-8 (a truncated sequence, a lone continuation
  // byte, an invalid lead byte) become U+FFFD, so a log shipper never rejects the line.
  EXPECT_EQ(JsonEscape("Zoë 🚢"), "Zoë 🚢");
  EXPECT_EQ(JsonEscape("bad \xC3"), "bad \\ufffd");
  EXPECT_EQ(JsonEscape("\x80x\xFF"), "\\ufffdx\\ufffd");
  EXPECT_EQ(JsonEscape("\xE2\x82"), "\\ufffd\\ufffd");
}

}  // namespace
}  // namespace ferry
