// SigV4 against signatures computed by botocore (AWS's Python SDK) for the same requests, and
// the AWS Signature Version 4 test suite's get-vanilla case.
#include "ferry/lake/sigv4.h"

#include <gtest/gtest.h>

namespace ferry::lake {
namespace {

S3Credentials Example() {
  S3Credentials c;
  c.access_key_id = "AKIDEXAMPLE";
  c.secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
  return c;
}

std::string Authorization(const std::vector<std::string>& headers) {
  for (const auto& h : headers) {
    if (h.rfind("Authorization: ", 0) == 0) return h.substr(15);
  }
  return "";
}

TEST(SigV4Test, GetVanilla) {
  auto h = SignV4({"GET", "https://example.amazonaws.com/", "", ""}, Example(), "us-east-1",
                  "service", "20150830T123600Z");
  EXPECT_EQ(Authorization(h),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(SigV4Test, EncodedPathSegmentsAreEncodedAgainAndTheQuerySorted) {
  auto h = SignV4({"POST",
                   "https://glue.eu-west-1.amazonaws.com/iceberg/v1/ns/tables/"
                   "Odd%20%22Keys%22?b=2&a=x%2Fy",
                   "{\"a\":1}", "application/json"},
                  Example(), "eu-west-1", "glue", "20261206T101010Z");
  const std::string auth = Authorization(h);
  EXPECT_NE(auth.find("SignedHeaders=content-type;host;x-amz-date,"), std::string::npos) << auth;
  EXPECT_NE(auth.find("Signature=68084d7813d77edc7ea0a663d44c719283ce944d31fc1bef933bbaf9f7ead34f"),
            std::string::npos)
      << auth;
}

}  // namespace
}  // namespace ferry::lake
