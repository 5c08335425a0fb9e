#include "ferry/lake/sigv4.h"

#include "ferry/lake/s3_client.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <ctime>

namespace ferry::lake {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out += kHex[p[i] >> 4];
    out += kHex[p[i] & 15];
  }
  return out;
}

std::string Sha256Hex(const std::string& data) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), d);
  return Hex(d, sizeof d);
}

std::string Hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &n);
  return std::string(reinterpret_cast<char*>(out), n);
}

// The query's parameters (already percent-encoded as sent), sorted by name then value.
std::string CanonicalQuery(const std::string& query) {
  std::vector<std::pair<std::string, std::string>> params;
  size_t start = 0;
  while (start <= query.size() && !query.empty()) {
    size_t amp = query.find('&', start);
    if (amp == std::string::npos) amp = query.size();
    const std::string part = query.substr(start, amp - start);
    if (!part.empty()) {
      const size_t eq = part.find('=');
      params.emplace_back(part.substr(0, eq),
                          eq == std::string::npos ? std::string() : part.substr(eq + 1));
    }
    start = amp + 1;
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [k, v] : params) {
    if (!out.empty()) out += '&';
    out += k + "=" + v;
  }
  return out;
}

}  // namespace

std::string AmzDateNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[20];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::vector<std::string> SignV4(const SigV4Request& request, const S3Credentials& credentials,
                                const std::string& region, const std::string& service,
                                const std::string& amz_date) {
  // scheme://authority/path?query
  std::string rest = request.url.substr(request.url.find("://") + 3);
  const size_t slash = rest.find('/');
  const std::string host = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "/" : rest.substr(slash);
  std::string query;
  if (const size_t q = path.find('?'); q != std::string::npos) {
    query = path.substr(q + 1);
    path = path.substr(0, q);
  }
  if (path.empty()) path = "/";

  std::vector<std::pair<std::string, std::string>> headers = {{"host", host},
                                                              {"x-amz-date", amz_date}};
  if (!request.content_type.empty()) headers.emplace_back("content-type", request.content_type);
  if (!credentials.session_token.empty()) {
    headers.emplace_back("x-amz-security-token", credentials.session_token);
  }
  std::sort(headers.begin(), headers.end());
  std::string canonical_headers, signed_headers;
  for (const auto& [k, v] : headers) {
    canonical_headers += k + ":" + v + "\n";
    if (!signed_headers.empty()) signed_headers += ';';
    signed_headers += k;
  }
  const std::string canonical = request.method + "\n" + UriEncode(path, true) + "\n" +
                                CanonicalQuery(query) + "\n" + canonical_headers + "\n" +
                                signed_headers + "\n" + Sha256Hex(request.body);
  const std::string day = amz_date.substr(0, 8);
  const std::string scope = day + "/" + region + "/" + service + "/aws4_request";
  const std::string to_sign =
      "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope + "\n" + Sha256Hex(canonical);
  std::string key = Hmac("AWS4" + credentials.secret_access_key, day);
  key = Hmac(key, region);
  key = Hmac(key, service);
  key = Hmac(key, "aws4_request");
  const std::string sig = Hmac(key, to_sign);
  std::vector<std::string> out = {
      "Host: " + host, "X-Amz-Date: " + amz_date,
      "Authorization: AWS4-HMAC-SHA256 Credential=" + credentials.access_key_id + "/" + scope +
          ", SignedHeaders=" + signed_headers +
          ", Signature=" + Hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size())};
  if (!credentials.session_token.empty()) {
    out.push_back("X-Amz-Security-Token: " + credentials.session_token);
  }
  return out;
}

}  // namespace ferry::lake
