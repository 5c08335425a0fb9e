#include "ferry/base/fs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "ferry/base/io.h"
#include "ferry/base/testing/temp_dir.h"

namespace ferry {
namespace {

class FsTest : public ::testing::Test {
 protected:
  std::string Path(const char* name) { return tmp_.File(name); }
  testing::TempDir tmp_;
  const std::filesystem::path& dir_ = tmp_.path();
};

TEST_F(FsTest, AtomicWriteReplacesAndLeavesNoTemporaryFile) {
  std::string p = Path("state.json");
  ASSERT_TRUE(WriteFileAtomic(p, "one").ok());
  ASSERT_TRUE(WriteFileAtomic(p, "two").ok());
  auto r = ReadFile(p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "two");
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir_)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(FsTest, NewFileRefusesToOverwrite) {
  std::string p = Path("v1.metadata.json");
  ASSERT_TRUE(WriteNewFile(p, "a").ok());
  Status s = WriteNewFile(p, "b");
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(*ReadFile(p), "a");
}

TEST_F(FsTest, MissingFileIsNotFoundAndNamesThePath) {
  auto r = ReadFile(Path("nope"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("nope"), std::string::npos);
}

TEST_F(FsTest, LocalOutputStreamCountsAndPersistsLargeAppends) {
  auto out = LocalOutputStream::Create(Path("data.bin"));
  ASSERT_TRUE(out.ok());
  std::string big(3 << 20, 'x');
  ASSERT_TRUE((*out)->Append("head").ok());
  ASSERT_TRUE((*out)->Append(big).ok());
  EXPECT_EQ((*out)->Tell(), big.size() + 4);
  ASSERT_TRUE((*out)->Close().ok());
  EXPECT_EQ(*FileSize(Path("data.bin")), big.size() + 4);
}

// Files closed without a sync are made durable by SyncFiles: an fsync each when few, one syncfs
// of their file system when many; both report a file that is not there by its name.
TEST_F(FsTest, SyncFilesFewOrManyAndNamesAMissingOne) {
  auto write = [&](const std::string& name) {
    auto f = WritableFile::Create(Path(name.c_str()));
    EXPECT_TRUE(f.ok());
    EXPECT_TRUE(f->Append(name).ok());
    EXPECT_TRUE(f->CloseUnsynced().ok());
    EXPECT_EQ(*ReadFile(Path(name.c_str())), name);  // the bytes are there before any sync
    return Path(name.c_str());
  };
  std::vector<std::string> few = {write("a"), write("b")};
  EXPECT_TRUE(SyncFiles(few).ok());
  std::vector<std::string> many;
  for (size_t i = 0; i < kSyncFilesystemFrom + 1; ++i)
    many.push_back(write("m" + std::to_string(i)));
  EXPECT_TRUE(SyncFiles(many).ok());
  EXPECT_TRUE(SyncFiles({}).ok());
  for (auto* list : {&few, &many}) {
    list->push_back(Path("gone.parquet"));
    Status s = SyncFiles(*list);
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
    EXPECT_NE(s.message().find("gone.parquet"), std::string::npos) << s.ToString();
  }
}

}  // namespace
}  // namespace ferry
