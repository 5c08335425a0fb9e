#include "ferry/source/change_spill.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ferry::source {
namespace {

namespace fs = std::filesystem;

class ChangeSpillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ferry_spill_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Entries sorted as a run wants them.
  static std::vector<ChangeSpill::Entry> Sorted(std::vector<ChangeSpill::Entry> e) {
    std::sort(e.begin(), e.end(), [](const auto& a, const auto& b) {
      return a.table != b.table ? a.table < b.table : a.key < b.key;
    });
    return e;
  }
  size_t Files() const {
    size_t n = 0;
    for (const auto& f : fs::directory_iterator(dir_)) n += f.is_regular_file();
    return n;
  }
  std::string dir_;
};

TEST_F(ChangeSpillTest, TheLastChangeOfEachKeyWinsAcrossRunsInKeyOrder) {
  ChangeSpill spill(dir_, "temp_dir");
  auto a = spill.WriteRun(Sorted({{0, "k1", 1, "a1"}, {0, "k2", 2, "a2"}, {1, "k1", 3, "t1"}}));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = spill.WriteRun(Sorted({{0, "k1", 5, "b1"}, {0, "k3", 4, "b3"}}));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Files(), 2u);
  EXPECT_GT(spill.disk_bytes(), 0u);
  std::vector<std::string> got;
  ASSERT_TRUE(spill
                  .Merge(
                      {*a, *b}, [](int, uint32_t) { return false; },
                      [&](const ChangeSpill::Entry& e) {
                        got.push_back(std::to_string(e.table) + ":" + std::string(e.key) + "=" +
                                      std::string(e.record));
                        return Status::OK();
                      })
                  .ok());
  EXPECT_EQ(got, (std::vector<std::string>{"0:k1=b1", "0:k2=a2", "0:k3=b3", "1:k1=t1"}));
  spill.DropRun(*a);
  spill.DropRun(*b);
  EXPECT_EQ(Files(), 0u);
  EXPECT_EQ(spill.disk_bytes(), 0u);
}

TEST_F(ChangeSpillTest, ARunSkippedForATableLetsTheEarlierChangeCount) {
  ChangeSpill spill(dir_, "temp_dir");
  auto a = spill.WriteRun({{0, "k", 1, "old"}, {1, "k", 2, "other"}});
  auto b = spill.WriteRun({{0, "k", 7, "new"}, {1, "k", 8, "newer"}});
  ASSERT_TRUE(a.ok() && b.ok());
  std::map<std::string, std::string> got;
  // Run b does not count for table 0 (that table held its transaction already).
  ASSERT_TRUE(spill
                  .Merge(
                      {*a, *b}, [&](int run, uint32_t t) { return run == *b && t == 0; },
                      [&](const ChangeSpill::Entry& e) {
                        got[std::to_string(e.table) + std::string(e.key)] = std::string(e.record);
                        return Status::OK();
                      })
                  .ok());
  EXPECT_EQ(got, (std::map<std::string, std::string>{{"0k", "old"}, {"1k", "newer"}}));
}

TEST_F(ChangeSpillTest, ManyLargeEntriesStreamBack) {
  ChangeSpill spill(dir_, "temp_dir");
  std::vector<int> runs;
  std::string big(300000, 'x');  // larger than the read buffer
  for (int r = 0; r < 3; ++r) {
    std::vector<std::string> keys;
    for (int i = 0; i < 2000; ++i) keys.push_back("key" + std::to_string(100000 + i * 3 + r));
    std::vector<ChangeSpill::Entry> e;
    for (const auto& k : keys) {
      e.push_back({0, k, static_cast<uint64_t>(r), k == keys[7] ? std::string_view(big) : "v"});
    }
    auto id = spill.WriteRun(Sorted(e));
    ASSERT_TRUE(id.ok());
    runs.push_back(*id);
  }
  size_t n = 0, bigs = 0;
  std::string last;
  ASSERT_TRUE(spill
                  .Merge(
                      runs, [](int, uint32_t) { return false; },
                      [&](const ChangeSpill::Entry& e) {
                        EXPECT_LT(last, std::string(e.key));
                        last = std::string(e.key);
                        ++n;
                        bigs += e.record.size() == big.size();
                        return Status::OK();
                      })
                  .ok());
  EXPECT_EQ(n, 6000u);
  EXPECT_EQ(bigs, 3u);
}

TEST_F(ChangeSpillTest, ADamagedFileIsCorruptionNeverAWrongChange) {
  ChangeSpill spill(dir_, "temp_dir");
  auto a = spill.WriteRun({{0, "key", 1, "the record"}});
  ASSERT_TRUE(a.ok());
  std::string path;
  for (const auto& f : fs::directory_iterator(dir_)) path = f.path();
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-6, std::ios::end);
    f.put('X');
  }
  Status s = spill.Merge(
      {*a}, [](int, uint32_t) { return false; },
      [](const ChangeSpill::Entry&) { return Status::OK(); });
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("checksum"), std::string::npos);
  // Cut short.
  fs::resize_file(path, fs::file_size(path) - 3);
  s = spill.Merge(
      {*a}, [](int, uint32_t) { return false; },
      [](const ChangeSpill::Entry&) { return Status::OK(); });
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
}

TEST_F(ChangeSpillTest, AFolderThatCannotBeWrittenIsNamedWithTheSetting) {
  ChangeSpill spill(dir_ + "/missing", "temp_dir");
  auto a = spill.WriteRun({{0, "k", 1, "v"}});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kIOError);
  EXPECT_NE(a.status().message().find(dir_ + "/missing (temp_dir)"), std::string::npos)
      << a.status().ToString();
}

TEST_F(ChangeSpillTest, LeftoversOfProcessesThatNoLongerRunAreRemoved) {
  // A pid that does not run: a child that has exited and been reaped.
  pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  const std::string dead = dir_ + "/ferry-spill-" + std::to_string(child) + "-0.run";
  const std::string alive = dir_ + "/ferry-spill-" + std::to_string(getppid()) + "-0.run";
  const std::string other = dir_ + "/unrelated.run";
  for (const auto& p : {dead, alive, other}) std::ofstream(p) << "x";
  EXPECT_EQ(ChangeSpill::RemoveLeftovers(dir_), 1);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(other));
}

}  // namespace
}  // namespace ferry::source
