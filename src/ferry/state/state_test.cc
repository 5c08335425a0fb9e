#include "ferry/state/state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "ferry/base/fs.h"
#include "ferry/base/testing/temp_dir.h"

namespace ferry::state {
namespace {

class StateTest : public ::testing::Test {
 protected:
  ferry::testing::TempDir tmp_;
  std::string path_ = tmp_.File("state.json");
};

TEST_F(StateTest, MissingFileMeansNoState) {
  auto store = OpenFileStateStore(path_);
  auto st = store->Load();
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->has_value());
}

TEST_F(StateTest, SavedStreamsComeBack) {
  auto store = OpenFileStateStore(path_);
  PipelineState st("shop");
  st.SetStream("shop", "orders", Json{{"mode", "full_refresh"}, {"chunks", Json::array({1, 2})}});
  st.SetStream("shop", "customers", Json{{"mode", "full_refresh"}});
  st.SetStream("shop", "orders", Json{{"mode", "full_refresh"}, {"chunks", Json::array({2})}});
  ASSERT_TRUE(store->Save(st).ok());
  auto back = store->Load();
  ASSERT_TRUE(back.ok());
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((*back)->pipeline(), "shop");
  EXPECT_EQ((*back)->Stream("shop", "orders")["chunks"], Json::array({2}));
  EXPECT_EQ((*back)->Streams().size(), 2u);
  EXPECT_TRUE((*back)->Stream("shop", "nope").is_null());
}

TEST_F(StateTest, TornFileIsCorruptionAndIsNotOverwrittenByLoad) {
  std::string torn = "{\"version\":1,\"pipeline\":\"shop\",\"streams\":[{\"stre";
  ASSERT_TRUE(WriteFileAtomic(path_, torn).ok());
  auto store = OpenFileStateStore(path_);
  auto st = store->Load();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kCorruption);
  EXPECT_NE(st.status().message().find(path_), std::string::npos);
  EXPECT_NE(st.status().message().find("move it away"), std::string::npos);
  EXPECT_EQ(*ReadFile(path_), torn);
}

TEST_F(StateTest, ForeignJsonIsRejectedWithTheReason) {
  ASSERT_TRUE(WriteFileAtomic(path_, "{\"hello\": 1}").ok());
  auto st = OpenFileStateStore(path_)->Load();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kCorruption);
  EXPECT_NE(st.status().message().find("no version"), std::string::npos);
}

TEST_F(StateTest, TemporaryFilesOfAKilledSyncGoWhenTheNextSyncTakesTheLock) {
  // A sync killed between the temp write and the rename leaves state.json.tmp-<pid> behind.
  ASSERT_TRUE(WriteNewFile(path_ + ".tmp-4242", "half").ok());
  ASSERT_TRUE(WriteNewFile(path_ + ".tmp-notapid", "someone else's").ok());
  ASSERT_TRUE(WriteNewFile(path_ + ".other", "someone else's").ok());
  {
    auto lock = PipelineLock::Acquire(path_, "shop");
    ASSERT_TRUE(lock.ok()) << lock.status().ToString();
    EXPECT_FALSE(FileExists(path_ + ".tmp-4242"));
  }
  EXPECT_TRUE(FileExists(path_ + ".tmp-notapid"));  // not a name ferry writes
  EXPECT_TRUE(FileExists(path_ + ".other"));
}

TEST_F(StateTest, ALinkInPlaceOfTheTemporaryFileIsNotFollowed) {
  const std::string victim = path_ + ".victim";
  ASSERT_TRUE(WriteNewFile(victim, "precious").ok());
  const std::string tmp = path_ + ".tmp-" + std::to_string(::getpid());
  ASSERT_EQ(::symlink(victim.c_str(), tmp.c_str()), 0);
  PipelineState st("p");
  ASSERT_TRUE(OpenFileStateStore(path_)->Save(st).ok());
  EXPECT_EQ(*ReadFile(victim), "precious");
  EXPECT_EQ((*OpenFileStateStore(path_)->Load())->pipeline(), "p");
}

TEST_F(StateTest, ALeftoverTemporaryFileDoesNotMatter) {
  // A crash between the temp write and the rename leaves state.json.tmp-<pid> behind.
  ASSERT_TRUE(WriteFileAtomic(path_ + ".tmp-1", "garbage").ok());
  auto store = OpenFileStateStore(path_);
  PipelineState st("p");
  ASSERT_TRUE(store->Save(st).ok());
  auto back = store->Load();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)->pipeline(), "p");
}

TEST_F(StateTest, OneSyncOfAPipelineHoldsItsLockUntilItEnds) {
  auto first = PipelineLock::Acquire(path_, "shop");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = PipelineLock::Acquire(path_, "shop");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists);
  const std::string& m = second.status().message();
  EXPECT_NE(m.find("another sync of pipeline 'shop' is running (pid " + std::to_string(::getpid()) +
                   " on "),
            std::string::npos)
      << m;
  first->reset();
  // Let go: nothing is left beside the state file, and the next sync takes it.
  EXPECT_FALSE(std::filesystem::exists(path_ + ".lock"));
  EXPECT_TRUE(PipelineLock::Acquire(path_, "shop").ok());
  // A folder that does not exist yet is made, as the state file's is.
  EXPECT_TRUE(PipelineLock::Acquire(tmp_.File("new/sub/state.json"), "shop").ok());
}

}  // namespace
}  // namespace ferry::state
