// How ferry reaches an S3-compatible object store: the endpoint, region, addressing style,
// credentials and the transfer settings of one warehouse, resolved once when the warehouse is
// opened.
//
// Resolution follows the AWS conventions, first match wins:
//   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN); else the
//                profile AWS_PROFILE (default "default") in the shared credentials file
//                (AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/credentials), then in the config
//                file (AWS_CONFIG_FILE, default ~/.aws/config, section "[profile NAME]");
//   region       the destination's s3.region, AWS_REGION, AWS_DEFAULT_REGION, the profile's
//                region, "us-east-1";
//   endpoint     the destination's s3.endpoint, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the
//                profile's endpoint_url (in its "s3 =" sub-section, then its own), else AWS's
//                regional endpoint https://s3.<region>.amazonaws.com;
//   path style   s3.path_style true/false; "auto" (the default): path-style requests
//                (http://host/bucket/key) for a custom endpoint, virtual-hosted ones
//                (https://bucket.host/key) for AWS, unless the profile's s3 addressing_style says.
//
// Secrets: the secret access key and session token are held here and sent only as the request
// signature (and the x-amz-security-token header); Describe() and every message name where the
// credentials came from, never their values.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "ferry/base/status.h"

namespace ferry::lake {

// What the pipeline file says (the destination's `s3:` keys); unset fields follow the
// conventions above.
struct S3Config {
  std::optional<std::string> endpoint;  // "http://127.0.0.1:9000", "https://s3.example.com"
  std::optional<std::string> region;
  std::optional<bool> path_style;         // nullopt: auto
  uint64_t part_size_bytes = 8ull << 20;  // multipart upload above this; each part this big
  int upload_concurrency = 4;             // parts of one file in flight at once
  int max_attempts = 8;                   // tries of one request (1 + retries)
  int64_t connect_timeout_ms = 10000;
  int64_t timeout_ms = 60000;  // a request without progress for this long is abandoned
};

inline constexpr uint64_t kS3MinPartBytes = 5ull << 20;  // S3's smallest part but the last
inline constexpr uint64_t kS3MaxPartBytes = 5ull << 30;

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty: none
  std::string source;         // where they came from, for messages ("AWS_ACCESS_KEY_ID")
};

struct S3Settings {
  std::string endpoint;  // scheme://host[:port], no trailing '/'
  std::string region;
  bool path_style = true;
  S3Credentials credentials;
  S3Config config;
  // "endpoint http://127.0.0.1:9000, region us-east-1, credentials from AWS_ACCESS_KEY_ID".
  std::string Describe() const;
};

// Looks up an environment variable; nullopt when unset (tests pass their own).
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnvironment();

// Storage settings a catalog hands out with a table (the LoadTableResult's `config`, or a
// `storage-credentials` entry): the keys of Iceberg's S3FileIO — s3.access-key-id,
// s3.secret-access-key, s3.session-token, s3.session-token-expires-at-ms, s3.endpoint,
// s3.path-style-access, client.region (or s3.region).
struct VendedS3 {
  S3Credentials credentials;  // source: "credentials vended by the catalog"
  int64_t expires_at_ms = 0;  // 0: not said
  std::optional<std::string> endpoint;
  std::optional<std::string> region;
  std::optional<bool> path_style;
};
// nullopt when `config` holds no access key (the catalog vends nothing).
std::optional<VendedS3> VendedS3Of(const std::map<std::string, std::string>& config);

// Resolves the settings. kInvalidArgument naming what to set when there are no credentials, an
// endpoint is not an http(s) URL, or a profile named by AWS_PROFILE does not exist; a shared
// file that exists but cannot be read keeps its read error.
Result<S3Settings> ResolveS3Settings(const S3Config& config, const EnvLookup& env);

}  // namespace ferry::lake
