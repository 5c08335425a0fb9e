// S3Client: the S3 REST calls ferry makes (GetObject by range, HeadObject, PutObject, the
// multipart upload calls, ListObjectsV2, DeleteObject), over libcurl, signed with AWS Signature
// Version 4 by libcurl (CURLOPT_AWS_SIGV4). No AWS SDK.
//
// Connections: easy handles are pooled and reused, so requests ride kept-alive connections.
// Retries: a request that fails with a network error, a timeout, HTTP 5xx, 429, SlowDown or
// RequestTimeout is sent again after an exponential backoff with full jitter (100 ms doubling,
// at most 5 s per wait), up to S3Config::max_attempts tries; every other answer is final.
// Timeouts: connecting (connect_timeout_ms), and a request that moves no byte for timeout_ms.
//
// Errors (each message names the operation, the s3:// location and the fix; never a secret):
//   kNotFound           no such key (NoSuchKey, a 404 to HEAD), no such bucket (NoSuchBucket),
//                       no such multipart upload (NoSuchUpload);
//   kAlreadyExists      a conditional PUT found the key taken (412 PreconditionFailed);
//   kPermissionDenied   403: the credentials lack the IAM action named in the message
//                       (AccessDenied), the access key is unknown (InvalidAccessKeyId), the
//                       secret does not match (SignatureDoesNotMatch), the token expired;
//   kInvalidArgument    the request was refused as malformed (a wrong region, ...);
//   kUnavailable        the store could not be reached or kept failing after every retry.
// Thread-safety: an S3Client is shared by every thread of a process.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/lake/s3_settings.h"

namespace ferry::lake {

// An object's address: "s3://bucket/key". kInvalidArgument for anything else.
struct S3Location {
  std::string bucket;
  std::string key;
  std::string ToUri() const { return "s3://" + bucket + "/" + key; }
};
Result<S3Location> ParseS3Location(const std::string& uri);

// Percent-encoding of RFC 3986 / SigV4: every byte but A-Z a-z 0-9 - . _ ~ (and '/' when
// `keep_slash`) becomes %XX.
std::string UriEncode(std::string_view s, bool keep_slash);

// libcurl's global initialization, once per process (every libcurl client of lake calls it).
void InitCurlOnce();
// The text of the first <tag>...</tag> in `xml`, entities decoded; nullopt when absent.
std::optional<std::string> XmlText(std::string_view xml, std::string_view tag);
// The inner text of every <tag>...</tag> element, in order.
std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag);

struct S3Object {
  std::string key;
  uint64_t size_bytes = 0;
  int64_t modified_ms = 0;  // LastModified
};

struct S3Upload {
  std::string key;
  std::string upload_id;
  int64_t initiated_ms = 0;
};

// "2026-01-02T03:04:05.678Z" (S3's timestamps) -> ms since the epoch; nullopt if malformed.
std::optional<int64_t> ParseIsoTimeMs(std::string_view text);

struct S3Head {
  uint64_t size_bytes = 0;
  std::string etag;
};

class S3Client {
 public:
  explicit S3Client(S3Settings settings);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  const S3Settings& settings() const { return settings_; }

  // Credentials that expire (those a REST catalog vends for a table): they are used from now on;
  // when fewer than five minutes of their life are left (`expires_at_ms`, 0: no expiry known), or
  // the store answers that they expired, `refresh` is asked for new ones (and their expiry)
  // before the next request. Thread-safe.
  using CredentialRefresh = std::function<Result<std::pair<S3Credentials, int64_t>>()>;
  void SetCredentials(S3Credentials credentials, int64_t expires_at_ms, CredentialRefresh refresh);

  // Replaces *out with the bytes [offset, offset + n) of the object (n > 0).
  Status GetRange(const S3Location& loc, uint64_t offset, uint64_t n, std::string* out);
  // The whole object.
  Result<std::string> Get(const S3Location& loc);
  Result<S3Head> Head(const S3Location& loc);
  // Puts the object; `if_none_match`: only if the key does not exist (If-None-Match: *). A
  // retried conditional put that finds the key taken reads it back: the same bytes are this
  // put's own earlier attempt, which landed (OK); other bytes are kAlreadyExists.
  Status Put(const S3Location& loc, std::string_view body, bool if_none_match);
  // Deletes the object; OK when it does not exist.
  Status Delete(const S3Location& loc);
  // Every object whose key starts with `prefix`, page by page (1000 keys a page).
  Result<std::vector<S3Object>> List(const std::string& bucket, const std::string& prefix);

  // Multipart upload: Create returns the upload id; UploadPart returns the part's ETag;
  // Complete (with If-None-Match: * when `if_none_match`; stores that ignore it complete
  // anyway) makes the object appear; Abort drops the parts.
  Result<std::string> CreateMultipartUpload(const S3Location& loc);
  Result<std::string> UploadPart(const S3Location& loc, const std::string& upload_id,
                                 int part_number, std::string_view body);
  Status CompleteMultipartUpload(const S3Location& loc, const std::string& upload_id,
                                 const std::vector<std::string>& etags, uint64_t size_bytes,
                                 bool if_none_match);
  Status AbortMultipartUpload(const S3Location& loc, const std::string& upload_id);
  // The open multipart uploads of keys starting with `prefix`, page by page.
  Result<std::vector<S3Upload>> ListMultipartUploads(const std::string& bucket,
                                                     const std::string& prefix);

 private:
  struct Request;
  struct Response;
  Result<Response> Call(const Request& req);
  Status SendOnce(void* curl, const Request& req, Response* resp, std::string* curl_error);
  std::string UrlOf(const std::string& bucket, const std::string& key,
                    const std::vector<std::pair<std::string, std::string>>& query) const;
  Status ErrorOf(const Request& req, const Response& resp) const;

  void* Acquire();
  void Release(void* curl);

  // The credentials for one request ("<key id>:<secret>" for libcurl, the session token),
  // refreshed first when they are about to expire (`expired`: the store said they had).
  std::pair<std::string, std::string> Credentials(bool expired);
  bool HasRefresh();

  S3Settings settings_;
  std::string sigv4_;  // "aws:amz:<region>:s3"
  std::mutex cred_mu_;
  std::string userpwd_;        // GUARDED_BY(cred_mu_): "<key id>:<secret>", for libcurl only
  std::string session_token_;  // GUARDED_BY(cred_mu_)
  int64_t expires_at_ms_ = 0;  // GUARDED_BY(cred_mu_)
  CredentialRefresh refresh_;  // GUARDED_BY(cred_mu_)
  std::mutex mu_;
  std::vector<void*> idle_;  // GUARDED_BY(mu_): easy handles with their kept-alive connections
};

}  // namespace ferry::lake
