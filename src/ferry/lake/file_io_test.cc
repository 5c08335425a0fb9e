#include "ferry/lake/file_io.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "ferry/base/testing/temp_dir.h"

namespace ferry::lake {
namespace {

class FileIOTest : public ::testing::Test {
 protected:
  std::string Uri(const std::string& name) const { return ToUri(tmp_.File(name)); }
  std::vector<std::string> Names() const { return tmp_.Files(); }

  ferry::testing::TempDir tmp_;
  std::shared_ptr<FileIO> io_ = LocalFileIO();
};

TEST_F(FileIOTest, ANewFileAppearsOnlyWhenClosed) {
  const std::string uri = Uri("t/data/a.parquet");
  auto out = io_->NewFile(uri);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_TRUE((*out)->Append("hello ").ok());
  ASSERT_TRUE((*out)->Append("world").ok());
  EXPECT_EQ((*out)->Tell(), 11u);
  // Until Close, readers see nothing at the location.
  EXPECT_FALSE(io_->Exists(uri));
  EXPECT_EQ(io_->Stat(uri).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE((*out)->Close().ok());
  EXPECT_TRUE(io_->Exists(uri));
  EXPECT_EQ(io_->Stat(uri)->size_bytes, 11u);
  EXPECT_EQ(*io_->Read(uri), "hello world");
  // No temporary file is left beside it.
  EXPECT_EQ(Names(), std::vector<std::string>{"t/data/a.parquet"});
}

TEST_F(FileIOTest, AStreamDroppedBeforeCloseLeavesNothing) {
  const std::string uri = Uri("t/data/b.parquet");
  {
    auto out = io_->NewFile(uri);
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE((*out)->Append(std::string(1 << 21, 'x')).ok());
  }
  EXPECT_FALSE(io_->Exists(uri));
  EXPECT_EQ(Names(), std::vector<std::string>{});
}

TEST_F(FileIOTest, ANewFileNeverReplacesOne) {
  const std::string uri = Uri("m/v1.metadata.json");
  ASSERT_TRUE(io_->WriteNew(uri, "first").ok());
  Status s = io_->WriteNew(uri, "second");
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  // Put by another writer while this one was writing: Close refuses, the first file stays.
  const std::string raced = Uri("m/v2.metadata.json");
  auto out = io_->NewFile(raced);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE((*out)->Append("late").ok());
  ASSERT_TRUE(io_->WriteNew(raced, "early").ok());
  EXPECT_EQ((*out)->Close().code(), StatusCode::kAlreadyExists);
  out->reset();
  EXPECT_EQ(*io_->Read(uri), "first");
  EXPECT_EQ(*io_->Read(raced), "early");
  EXPECT_EQ(Names(), (std::vector<std::string>{"m/v1.metadata.json", "m/v2.metadata.json"}));
}

// A data file placed without a sync (Durability::kOnPersist) is complete at Close, and Persist
// makes it durable; a small file touches no folder before its Close, so one dropped unclosed
// leaves not even the folders it would have gone in.
TEST_F(FileIOTest, DeferredDurabilityAndNothingMadeBeforeClose) {
  const std::string uri = Uri("t/data/day=1/c.parquet");
  {
    auto dropped = io_->NewFile(uri, FileIO::Durability::kOnPersist);
    ASSERT_TRUE(dropped.ok());
    ASSERT_TRUE((*dropped)->Append("never closed").ok());
    EXPECT_FALSE(std::filesystem::exists(tmp_.path() / "t"));
  }
  EXPECT_FALSE(std::filesystem::exists(tmp_.path() / "t"));
  auto out = io_->NewFile(uri, FileIO::Durability::kOnPersist);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE((*out)->Append("rows").ok());
  EXPECT_EQ((*out)->Tell(), 4u);
  ASSERT_TRUE((*out)->Close().ok());
  EXPECT_EQ(*io_->Read(uri), "rows");
  EXPECT_TRUE(io_->Persist({uri}).ok());
  EXPECT_EQ(Names(), std::vector<std::string>{"t/data/day=1/c.parquet"});
  Status s = io_->Persist({uri, Uri("t/data/day=2/missing.parquet")});
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("missing.parquet"), std::string::npos);
}

TEST_F(FileIOTest, ReadsByRange) {
  const std::string uri = Uri("f.bin");
  ASSERT_TRUE(io_->WriteNew(uri, "0123456789").ok());
  auto f = io_->OpenFile(uri, 10);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->size(), 10u);
  std::string got;
  ASSERT_TRUE((*f)->ReadAt(3, 4, &got).ok());
  EXPECT_EQ(got, "3456");
  ASSERT_TRUE((*f)->ReadAt(10, 0, &got).ok());
  EXPECT_EQ(got, "");
  EXPECT_EQ((*f)->ReadAt(8, 3, &got).code(), StatusCode::kCorruption);
  EXPECT_EQ(io_->OpenFile(Uri("nope.bin")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(io_->Read(Uri("nope.bin")).status().code(), StatusCode::kNotFound);
}

TEST_F(FileIOTest, ListsByPrefixAndDeletes) {
  for (const char* n : {"t/data/a.parquet", "t/data/b.parquet", "t/metadata/snap-1.avro",
                        "t/metadata/snap-2.avro", "t/metadata/v1.metadata.json", "u/x"}) {
    ASSERT_TRUE(io_->WriteNew(Uri(n), n).ok());
  }
  auto in_table = io_->List(Uri("t/"));
  ASSERT_TRUE(in_table.ok()) << in_table.status().ToString();
  ASSERT_EQ(in_table->size(), 5u);
  EXPECT_EQ((*in_table)[0].location, Uri("t/data/a.parquet"));
  EXPECT_EQ((*in_table)[0].size_bytes, std::string("t/data/a.parquet").size());
  EXPECT_EQ((*in_table)[4].location, Uri("t/metadata/v1.metadata.json"));
  // A prefix need not end at a folder: object-store semantics.
  auto snaps = io_->List(Uri("t/metadata/snap-"));
  ASSERT_TRUE(snaps.ok());
  ASSERT_EQ(snaps->size(), 2u);
  EXPECT_EQ((*snaps)[1].location, Uri("t/metadata/snap-2.avro"));
  EXPECT_TRUE(io_->List(Uri("nowhere/"))->empty());

  ASSERT_TRUE(io_->Delete(Uri("t/data/a.parquet")).ok());
  EXPECT_TRUE(io_->Delete(Uri("t/data/a.parquet")).ok());  // gone already: fine
  EXPECT_EQ(io_->List(Uri("t/data/"))->size(), 1u);
}

TEST(FileIOChoice, ByScheme) {
  EXPECT_EQ(SchemeOf("s3://lake/wh"), "s3");
  EXPECT_EQ(SchemeOf("FILE:///x"), "file");
  EXPECT_EQ(SchemeOf("/abs/path"), "");
  EXPECT_EQ(SchemeOf("./rel:x"), "");
  auto local = OpenFileIO("file:///data/wh");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->get(), LocalFileIO().get());
  EXPECT_TRUE(OpenFileIO("/data/wh").ok());
  EXPECT_TRUE(OpenFileIO("file:/data/wh").ok());
  for (const char* uri : {"gs://b/wh", "abfss://c@a.dfs.core.windows.net/wh", "hdfs://nn/wh"}) {
    auto r = OpenFileIO(uri);
    ASSERT_FALSE(r.ok()) << uri;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    // Names the scheme, the value and the fix.
    EXPECT_NE(r.status().message().find(SchemeOf(uri) + "://"), std::string::npos);
    EXPECT_NE(r.status().message().find(uri), std::string::npos);
    EXPECT_NE(r.status().message().find("local folder"), std::string::npos);
    EXPECT_NE(r.status().message().find("s3://bucket/prefix"), std::string::npos);
  }
  // s3:// is served by the S3 implementation; a location without a bucket is refused.
  EXPECT_EQ(OpenFileIO("s3:///wh").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(OpenFileIO("relative/wh").ok());
  EXPECT_FALSE(OpenFileIO("file://host/wh").ok());
}

TEST_F(FileIOTest, ProbeWritesReadsAndDeletesAProbeFileAndLeavesNothing) {
  ASSERT_TRUE(ProbeStorage(*io_, Uri("wh")).ok());
  for (const auto& n : Names()) EXPECT_EQ(n.find(".ferry-probe-"), std::string::npos) << n;
  // A warehouse that cannot be written: the step and the path are named.
  ASSERT_TRUE(io_->WriteNew(Uri("file"), "x").ok());
  Status s = ProbeStorage(*io_, Uri("file/wh"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("writing the probe file"), std::string::npos) << s.ToString();
}

TEST(FileIOChoice, LocationsJoinAndConvert) {
  EXPECT_EQ(JoinLocation("file:///wh", "ns"), "file:///wh/ns");
  EXPECT_EQ(JoinLocation("file:///wh/", "ns"), "file:///wh/ns");
  EXPECT_EQ(JoinLocation("s3://b/wh", "ns"), "s3://b/wh/ns");
  EXPECT_EQ(ToUri("/a/b"), "file:///a/b");
  EXPECT_EQ(*LocalPath("file:///a/b"), "/a/b");
  EXPECT_EQ(*LocalPath("file:/a/b"), "/a/b");
  EXPECT_EQ(*LocalPath("/a/b"), "/a/b");
  EXPECT_EQ(LocalPath("s3://b/k").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry::lake
