#include "ferry/base/channel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace ferry {
namespace {

TEST(ChannelTest, DeliversEverythingInOrderFromOneProducer) {
  Channel<int> ch(4);
  std::thread producer([&] {
    for (int i = 0; i < 1000; ++i) ASSERT_TRUE(ch.Send(i));
    ch.Close();
  });
  int expected = 0;
  while (auto v = ch.Receive()) EXPECT_EQ(*v, expected++);
  producer.join();
  EXPECT_EQ(expected, 1000);
}

TEST(ChannelTest, NeverHoldsMoreThanItsCapacity) {
  Channel<int> ch(3);
  std::atomic<int> sent{0};
  std::thread producer([&] {
    for (int i = 0; i < 10; ++i) {
      ch.Send(i);
      sent.fetch_add(1);
    }
  });
  // Nobody receives: the producer must block after 3 items.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(sent.load(), 3);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(ch.Receive().has_value());
  producer.join();
  EXPECT_EQ(sent.load(), 10);
}

TEST(ChannelTest, CloseWakesABlockedSenderAndFailsIt) {
  Channel<int> ch(1);
  ASSERT_TRUE(ch.Send(1));
  std::atomic<bool> result{true};
  std::thread producer([&] { result = ch.Send(2); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ch.Close();
  producer.join();
  EXPECT_FALSE(result.load());
  EXPECT_EQ(ch.Receive().value(), 1);  // what was queued before Close is still delivered
  EXPECT_FALSE(ch.Receive().has_value());
}

TEST(ChannelTest, BoundsTheWeightOfWhatItHoldsButAlwaysTakesOneItem) {
  Channel<std::string> ch(100, 10, [](const std::string& s) { return s.size(); });
  std::atomic<int> sent{0};
  std::thread producer([&] {
    for (const char* s : {"aaaa", "bbbb", "cc", "dddddddddddddddd", "e"}) {
      ch.Send(s);
      sent.fetch_add(1);
    }
  });
  // 4 + 4 + 2 = 10 fit; the 16-byte item waits although the count bound is far.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(sent.load(), 3);
  EXPECT_EQ(ch.Receive().value(), "aaaa");
  EXPECT_EQ(ch.Receive().value(), "bbbb");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(sent.load(), 3);  // 2 + 16 is still over the limit
  EXPECT_EQ(ch.Receive().value(), "cc");
  // Empty: the heavy item goes in alone, and the light one waits behind it.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(sent.load(), 4);
  EXPECT_EQ(ch.Receive().value(), "dddddddddddddddd");
  EXPECT_EQ(ch.Receive().value(), "e");
  producer.join();
  EXPECT_EQ(sent.load(), 5);
}

}  // namespace
}  // namespace ferry
