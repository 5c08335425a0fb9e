// AWS Signature Version 4 of one HTTP request, for the services whose paths are signed as AWS
// signs them for every service but S3: each path segment URI-encoded once more (a table named
// `Odd "Keys"`, sent as Odd%20%22Keys%22, is signed as Odd%2520%2522Keys%2522). libcurl's own
// signer (used for S3, where paths are signed as sent) does not, so catalog requests to Glue's
// and S3 Tables' endpoints are signed here.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ferry/lake/s3_settings.h"

namespace ferry::lake {

struct SigV4Request {
  std::string method;  // "GET", "POST", ...
  std::string url;     // "https://host[:port]/path?query", path and query percent-encoded
  std::string body;
  std::string content_type;  // signed when not empty
};

// The headers to send with the request — Host, X-Amz-Date, X-Amz-Security-Token (with a session
// token) and Authorization — as "Name: value" lines. `amz_date` is "YYYYMMDDTHHMMSSZ" (UTC).
std::vector<std::string> SignV4(const SigV4Request& request, const S3Credentials& credentials,
                                const std::string& region, const std::string& service,
                                const std::string& amz_date);

// "YYYYMMDDTHHMMSSZ" of now.
std::string AmzDateNow();

}  // namespace ferry::lake
