// The parts of the S3 FileIO that need no server: locations, encodings, the XML answers, and
// how settings and credentials are resolved from the pipeline file, the environment and the
// AWS shared files. Requests against real stores are tested end to end
// (tests/e2e/test_s3_warehouse.py).
#include <gtest/gtest.h>

#include <map>

#include "ferry/base/fs.h"
#include "ferry/base/testing/temp_dir.h"
#include "ferry/lake/file_io.h"
#include "ferry/lake/s3_client.h"
#include "ferry/lake/s3_file_io.h"
#include "ferry/lake/s3_settings.h"

namespace ferry::lake {
namespace {

TEST(S3Location, ParsesBucketAndKey) {
  auto a = ParseS3Location("s3://lake/wh/ns/t/data/x.parquet");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->bucket, "lake");
  EXPECT_EQ(a->key, "wh/ns/t/data/x.parquet");
  EXPECT_EQ(a->ToUri(), "s3://lake/wh/ns/t/data/x.parquet");
  auto b = ParseS3Location("s3a://lake");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->bucket, "lake");
  EXPECT_EQ(b->key, "");
  EXPECT_FALSE(ParseS3Location("s3:///key").ok());
  EXPECT_FALSE(ParseS3Location("file:///x").ok());
}

TEST(S3Encoding, UriEncodeKeepsUnreservedAndOptionallySlashes) {
  EXPECT_EQ(UriEncode("a-b_c.d~e/f g", true), "a-b_c.d~e/f%20g");
  EXPECT_EQ(UriEncode("a/b=c+d", false), "a%2Fb%3Dc%2Bd");
  EXPECT_EQ(UriEncode("\xc3\xa9", true), "%C3%A9");
}

TEST(S3Xml, ElementsTextAndEntities) {
  const std::string list =
      "<?xml version=\"1.0\"?><ListBucketResult><IsTruncated>true</IsTruncated>"
      "<Contents><Key>wh/a&amp;b.parquet</Key><Size>12</Size></Contents>"
      "<Contents><Key>wh/&#233;&#x41;</Key><Size>7</Size></Contents>"
      "<NextContinuationToken>tok/=</NextContinuationToken></ListBucketResult>";
  auto items = XmlElements(list, "Contents");
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(*XmlText(items[0], "Key"), "wh/a&b.parquet");
  EXPECT_EQ(*XmlText(items[1], "Key"),
            "wh/\xc3\xa9"
            "A");
  EXPECT_EQ(*XmlText(items[1], "Size"), "7");
  EXPECT_EQ(*XmlText(list, "NextContinuationToken"), "tok/=");
  EXPECT_FALSE(XmlText(list, "UploadId").has_value());
  EXPECT_EQ(*XmlText("<Error><Code>SlowDown</Code></Error>", "Code"), "SlowDown");
}

class S3SettingsTest : public ::testing::Test {
 protected:
  EnvLookup Env() const {
    return [this](const std::string& n) -> std::optional<std::string> {
      auto it = env_.find(n);
      if (it == env_.end()) return std::nullopt;
      return it->second;
    };
  }
  void Write(const std::string& name, const std::string& text) {
    ASSERT_TRUE(MakeDirs(tmp_.File(".aws")).ok());
    ASSERT_TRUE(WriteFileAtomic(tmp_.File(".aws/" + name), text).ok());
  }
  ferry::testing::TempDir tmp_;
  std::map<std::string, std::string> env_{{"HOME", tmp_.path().string()}};
};

TEST_F(S3SettingsTest, EnvironmentCredentialsAndAwsDefaults) {
  env_["AWS_ACCESS_KEY_ID"] = "AKIDEXAMPLE";
  env_["AWS_SECRET_ACCESS_KEY"] = "wJalrXUtnFEMI";
  env_["AWS_SESSION_TOKEN"] = "token-1";
  env_["AWS_REGION"] = "eu-west-1";
  auto s = ResolveS3Settings(S3Config{}, Env());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->credentials.access_key_id, "AKIDEXAMPLE");
  EXPECT_EQ(s->credentials.session_token, "token-1");
  EXPECT_EQ(s->region, "eu-west-1");
  EXPECT_EQ(s->endpoint, "https://s3.eu-west-1.amazonaws.com");
  EXPECT_FALSE(s->path_style);  // AWS: virtual-hosted
  // What messages show names the source, never the secret or the token.
  const std::string shown = s->Describe();
  EXPECT_NE(shown.find("AWS_ACCESS_KEY_ID"), std::string::npos);
  EXPECT_EQ(shown.find("wJalrXUtnFEMI"), std::string::npos);
  EXPECT_EQ(shown.find("token-1"), std::string::npos);
}

TEST_F(S3SettingsTest, ConfiguredEndpointWinsAndMeansPathStyle) {
  env_["AWS_ACCESS_KEY_ID"] = "k";
  env_["AWS_SECRET_ACCESS_KEY"] = "s";
  env_["AWS_ENDPOINT_URL"] = "http://other:1";
  env_["AWS_ENDPOINT_URL_S3"] = "http://s3only:2";
  S3Config c;
  auto s = ResolveS3Settings(c, Env());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->endpoint, "http://s3only:2");  // the S3-specific variable first
  EXPECT_TRUE(s->path_style);
  EXPECT_EQ(s->region, "us-east-1");
  c.endpoint = "http://127.0.0.1:9000/";
  c.region = "local";
  c.path_style = false;
  s = ResolveS3Settings(c, Env());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(s->region, "local");
  EXPECT_FALSE(s->path_style);
  for (const char* bad : {"127.0.0.1:9000", "ftp://h", "http://h/path", "http://"}) {
    c.endpoint = bad;
    auto r = ResolveS3Settings(c, Env());
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("destination.s3.endpoint"), std::string::npos);
  }
}

TEST_F(S3SettingsTest, ProfilesFromTheSharedFiles) {
  Write("credentials",
        "[default]\naws_access_key_id = DEFAULTKEY\naws_secret_access_key = defaultsecret\n"
        "# a comment\n[lake]\naws_access_key_id=LAKEKEY\naws_secret_access_key=lakesecret\n"
        "aws_session_token = laketoken\n");
  Write("config",
        "[default]\nregion = us-west-2\n[profile lake]\nregion = eu-central-1\ns3 =\n"
        "  endpoint_url = http://127.0.0.1:7480\n  addressing_style = virtual\n");
  auto s = ResolveS3Settings(S3Config{}, Env());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->credentials.access_key_id, "DEFAULTKEY");
  EXPECT_EQ(s->region, "us-west-2");
  EXPECT_NE(s->credentials.source.find("profile 'default'"), std::string::npos);
  env_["AWS_PROFILE"] = "lake";
  s = ResolveS3Settings(S3Config{}, Env());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->credentials.access_key_id, "LAKEKEY");
  EXPECT_EQ(s->credentials.secret_access_key, "lakesecret");
  EXPECT_EQ(s->credentials.session_token, "laketoken");
  EXPECT_EQ(s->region, "eu-central-1");
  EXPECT_EQ(s->endpoint, "http://127.0.0.1:7480");
  EXPECT_FALSE(s->path_style);  // the profile's addressing_style
  // The environment's credentials come before any profile.
  env_["AWS_ACCESS_KEY_ID"] = "ENVKEY";
  env_["AWS_SECRET_ACCESS_KEY"] = "envsecret";
  s = ResolveS3Settings(S3Config{}, Env());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->credentials.access_key_id, "ENVKEY");
  EXPECT_EQ(s->credentials.session_token, "");
}

TEST_F(S3SettingsTest, MissingCredentialsAndProfilesNameTheFix) {
  auto none = ResolveS3Settings(S3Config{}, Env());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("AWS_ACCESS_KEY_ID"), std::string::npos);
  EXPECT_NE(none.status().message().find("AWS_PROFILE"), std::string::npos);

  env_["AWS_PROFILE"] = "nope";
  auto missing = ResolveS3Settings(S3Config{}, Env());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("AWS_PROFILE is 'nope'"), std::string::npos);
  env_.erase("AWS_PROFILE");

  env_["AWS_ACCESS_KEY_ID"] = "k";
  auto half = ResolveS3Settings(S3Config{}, Env());
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("AWS_SECRET_ACCESS_KEY is not"), std::string::npos);
}

TEST(S3FileIOOpen, CredentialsAreNeededAndPartSizesChecked) {
  std::map<std::string, std::string> env;
  EnvLookup lookup = [&env](const std::string& n) -> std::optional<std::string> {
    auto it = env.find(n);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  auto no_creds = OpenS3FileIO("s3://lake/wh", S3Config{}, lookup);
  ASSERT_FALSE(no_creds.ok());
  EXPECT_NE(no_creds.status().message().find("no AWS credentials"), std::string::npos);
  env["AWS_ACCESS_KEY_ID"] = "k";
  env["AWS_SECRET_ACCESS_KEY"] = "s";
  auto io = OpenS3FileIO("s3://lake/wh", S3Config{}, lookup);
  ASSERT_TRUE(io.ok()) << io.status().ToString();
  EXPECT_NE((*io)->Describe().find("s3.us-east-1.amazonaws.com"), std::string::npos);
  S3Config tiny;
  tiny.part_size_bytes = 1 << 20;
  auto small = OpenS3FileIO("s3://lake/wh", tiny, lookup);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("5MiB"), std::string::npos);
}

}  // namespace
}  // namespace ferry::lake
