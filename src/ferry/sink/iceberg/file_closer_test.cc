#include "ferry/sink/iceberg/file_closer.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "ferry/base/testing/temp_dir.h"
#include "ferry/format/parquet/reader.h"

namespace ferry::sink {
namespace {

class FileCloserTest : public ::testing::Test {
 protected:
  FileCloserTest() {
    auto s = std::make_shared<Schema>();
    s->fields = {{1, "id", DataType::Int64(), true, ""},
                 {2, "note", DataType::String(), false, ""}};
    schema_ = s;
  }
  static lake::PartitionValue Day(int32_t day) {
    lake::PartitionValue v;
    v.null = false;
    v.i = day;
    return v;
  }
  std::string Uri(const std::string& name) const { return lake::ToUri(tmp_.File(name)); }
  // A file of `rows` rows whose ids start at `first`, open, for partition `day`.
  DataFileInProgress Open(const std::string& name, int64_t first, int64_t rows, int32_t day) {
    DataFileInProgress f;
    f.uri = Uri(name);
    f.spec_id = 1;
    f.partition = {Day(day)};
    auto out = io_->NewFile(f.uri, lake::FileIO::Durability::kOnPersist);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    auto w = parquet::Writer::Open(std::move(*out), schema_);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    Batch b(schema_);
    for (int64_t i = first; i < first + rows; ++i) {
      b.column(0).AppendInt64(i);
      b.column(1).AppendBytes("row " + std::to_string(i));
    }
    EXPECT_TRUE((*w)->Write(b).ok());
    f.writer = std::move(*w);
    return f;
  }
  std::vector<std::string> Names() const { return tmp_.Files(); }

  ferry::testing::TempDir tmp_;
  std::shared_ptr<lake::FileIO> io_ = lake::LocalFileIO();
  std::shared_ptr<const Schema> schema_;
};

// Files handed over come back closed, described and readable, in the order handed over, even
// when the queue's budget lets only one wait at a time.
TEST_F(FileCloserTest, ClosesEveryFileInOrder) {
  FileCloser closer(io_.get(), /*max_queued_bytes=*/1);
  constexpr int kFiles = 40;
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_TRUE(
        closer.Submit(Open("d" + std::to_string(i) + "/f.parquet", i * 1000, 100 + i, i)).ok());
  }
  EXPECT_EQ(closer.rows(), uint64_t{kFiles * 100 + kFiles * (kFiles - 1) / 2});
  std::vector<lake::DataFile> done;
  ASSERT_TRUE(closer.Wait(&done).ok());
  EXPECT_EQ(closer.rows(), 0u);
  ASSERT_EQ(done.size(), size_t{kFiles});
  for (int i = 0; i < kFiles; ++i) {
    const lake::DataFile& f = done[static_cast<size_t>(i)];
    EXPECT_EQ(f.path, Uri("d" + std::to_string(i) + "/f.parquet"));
    EXPECT_EQ(f.record_count, 100 + i);
    EXPECT_EQ(f.spec_id, 1);
    ASSERT_EQ(f.partition.size(), 1u);
    EXPECT_EQ(f.partition[0], Day(i));
    auto file = io_->OpenFile(f.path);
    ASSERT_TRUE(file.ok());
    EXPECT_EQ((*file)->size(), static_cast<uint64_t>(f.file_size_bytes));
    auto r = parquet::Reader::Open(std::move(*file), schema_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)->num_rows(), static_cast<uint64_t>(100 + i));
  }
  std::vector<std::string> uris;
  for (const auto& f : done) uris.push_back(f.path);
  EXPECT_TRUE(io_->Persist(uris).ok());
  // A second round on the same closer.
  ASSERT_TRUE(closer.Submit(Open("again.parquet", 0, 5, 0)).ok());
  done.clear();
  ASSERT_TRUE(closer.Wait(&done).ok());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].record_count, 5);
}

// A close that fails (its location taken meanwhile) deletes nothing of the other writer's, is
// reported by the next Submit and by Wait, and the files closed are still listed for the caller
// to delete.
TEST_F(FileCloserTest, AFailedCloseIsReportedAndTheOthersListed) {
  FileCloser closer(io_.get(), 64 << 20);
  DataFileInProgress taken = Open("taken.parquet", 0, 10, 0);
  ASSERT_TRUE(io_->WriteNew(Uri("taken.parquet"), "another writer's").ok());
  ASSERT_TRUE(closer.Submit(Open("ok.parquet", 0, 10, 0)).ok());
  ASSERT_TRUE(closer.Submit(std::move(taken)).ok());
  std::vector<lake::DataFile> done;
  Status s = closer.Wait(&done);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  EXPECT_NE(s.message().find("taken.parquet"), std::string::npos) << s.ToString();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].path, Uri("ok.parquet"));
  // The failed close deleted its location: here the other writer's file. What ferry writes has a
  // fresh name each time, so that never meets another's file; the test shows only that the
  // failure is not silent.
  EXPECT_EQ(Names(), std::vector<std::string>{"ok.parquet"});
  // The error was taken by Wait: the closer goes on.
  ASSERT_TRUE(closer.Submit(Open("next.parquet", 0, 3, 0)).ok());
  done.clear();
  EXPECT_TRUE(closer.Wait(&done).ok());
  EXPECT_EQ(done.size(), 1u);
}

// A closer dropped with files still waiting leaves no half-written file: each file is either
// closed whole or never made.
TEST_F(FileCloserTest, DroppedWithFilesWaitingLeavesNothingHalfWritten) {
  {
    FileCloser closer(io_.get(), 256 << 20);
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(closer.Submit(Open("w" + std::to_string(i) + ".parquet", 0, 2000, 0)).ok());
    }
  }
  for (const std::string& name : Names()) {
    EXPECT_EQ(name.find(".tmp-"), std::string::npos) << name;
    auto file = io_->OpenFile(Uri(name));
    ASSERT_TRUE(file.ok());
    auto r = parquet::Reader::Open(std::move(*file), schema_);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_EQ((*r)->num_rows(), 2000u);
  }
}

}  // namespace
}  // namespace ferry::sink
