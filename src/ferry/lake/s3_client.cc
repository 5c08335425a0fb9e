#include "ferry/lake/s3_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>

#include "ferry/base/log.h"

namespace ferry::lake {
namespace {

constexpr size_t kMaxErrorBody = 64 << 10;  // bytes of an error answer kept
constexpr size_t kMaxIdleHandles = 32;
constexpr int64_t kBackoffFirstMs = 100;
constexpr int64_t kBackoffMaxMs = 5000;

std::string XmlUnescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    if (semi == std::string_view::npos) {
      out += s[i];
      continue;
    }
    const std::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp") {
      out += '&';
    } else if (ent == "lt") {
      out += '<';
    } else if (ent == "gt") {
      out += '>';
    } else if (ent == "quot") {
      out += '"';
    } else if (ent == "apos") {
      out += '\'';
    } else if (!ent.empty() && ent[0] == '#') {
      const bool hex = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X');
      const std::string digits(ent.substr(hex ? 2 : 1));
      char* end = nullptr;
      const unsigned long cp = std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
      if (digits.empty() || *end != '\0' || cp > 0x10FFFF) {
        out.append(s.substr(i, semi - i + 1));
      } else if (cp < 0x80) {
        out += static_cast<char>(cp);
      } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
    } else {
      out.append(s.substr(i, semi - i + 1));
    }
    i = semi;
  }
  return out;
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

std::string TrimHeaderValue(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) {
    v.remove_suffix(1);
  }
  return std::string(v);
}

}  // namespace

std::optional<int64_t> ParseIsoTimeMs(std::string_view text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  const std::string t(text);
  if (std::sscanf(t.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &y, &mo, &d, &h, &mi, &sec) != 6) {
    return std::nullopt;
  }
  int ms = 0;
  if (t.size() > 20 && t[19] == '.') {
    int scale = 100;
    for (size_t i = 20; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); ++i) {
      ms += (t[i] - '0') * scale;
      scale /= 10;
    }
  }
  struct tm tm = {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + ms;
}

Result<S3Location> ParseS3Location(const std::string& uri) {
  size_t start = 0;
  if (uri.rfind("s3://", 0) == 0) {
    start = 5;
  } else if (uri.rfind("s3a://", 0) == 0) {
    start = 6;
  } else {
    return Status::InvalidArgument("'" + uri + "' is not an s3:// location");
  }
  const size_t slash = uri.find('/', start);
  S3Location loc;
  loc.bucket = uri.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
  if (slash != std::string::npos) loc.key = uri.substr(slash + 1);
  if (loc.bucket.empty()) {
    return Status::InvalidArgument("'" + uri + "' names no bucket: write s3://bucket/prefix");
  }
  return loc;
}

void InitCurlOnce() {
  static const bool done = [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return true;
  }();
  (void)done;
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  size_t pos = 0;
  while (true) {
    const size_t a = xml.find(open, pos);
    if (a == std::string_view::npos) break;
    const size_t b = xml.find(close, a + open.size());
    if (b == std::string_view::npos) break;
    out.push_back(xml.substr(a + open.size(), b - a - open.size()));
    pos = b + close.size();
  }
  return out;
}

std::optional<std::string> XmlText(std::string_view xml, std::string_view tag) {
  auto all = XmlElements(xml, tag);
  if (all.empty()) return std::nullopt;
  return XmlUnescape(all.front());
}

struct S3Client::Request {
  const char* op = "";      // the S3 operation, for messages ("PutObject")
  const char* action = "";  // the IAM action it needs ("s3:PutObject")
  std::string method = "GET";
  std::string bucket;
  std::string key;                                         // empty: the bucket itself
  std::vector<std::pair<std::string, std::string>> query;  // sorted by name
  std::vector<std::string> headers;
  std::string_view body;
  std::string* sink = nullptr;       // a successful answer's body goes here (else Response::body)
  bool credentials_expired = false;  // the store said so: refresh them before sending
};

struct S3Client::Response {
  long http = 0;
  std::string body;
  std::string etag;
  std::optional<uint64_t> content_length;
  int attempts = 0;
};

namespace {

struct WriteTarget {
  CURL* curl = nullptr;
  std::string* ok = nullptr;
  std::string* error = nullptr;
};

size_t OnWrite(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<WriteTarget*>(user);
  long code = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
  const size_t len = size * n;
  if (code >= 200 && code < 300 && t->ok != nullptr) {
    t->ok->append(data, len);
  } else if (t->error->size() < kMaxErrorBody) {
    t->error->append(data, std::min(len, kMaxErrorBody - t->error->size()));
  }
  return len;
}

struct HeaderTarget {
  std::string etag;
  std::optional<uint64_t> content_length;
};

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<HeaderTarget*>(user);
  const std::string_view line(data, size * n);
  if (StartsWithNoCase(line, "HTTP/")) {
    *t = HeaderTarget{};  // a new answer (after "100 Continue")
  } else if (StartsWithNoCase(line, "etag:")) {
    t->etag = TrimHeaderValue(line.substr(5));
  } else if (StartsWithNoCase(line, "content-length:")) {
    t->content_length = std::strtoull(TrimHeaderValue(line.substr(15)).c_str(), nullptr, 10);
  }
  return size * n;
}

struct ReadSource {
  std::string_view body;
  size_t pos = 0;
};

size_t OnRead(char* buffer, size_t size, size_t n, void* user) {
  auto* s = static_cast<ReadSource*>(user);
  const size_t len = std::min(size * n, s->body.size() - s->pos);
  if (len == 0) return 0;
  std::memcpy(buffer, s->body.data() + s->pos, len);
  s->pos += len;
  return len;
}

int OnSeek(void* user, curl_off_t offset, int origin) {
  auto* s = static_cast<ReadSource*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > s->body.size()) {
    return CURL_SEEKFUNC_CANTSEEK;
  }
  s->pos = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

bool Retryable(long http, const std::string& body) {
  if (http >= 500 || http == 429) return true;
  const auto code = XmlText(body, "Code");
  if (!code) return false;
  return *code == "SlowDown" || *code == "RequestTimeout" || *code == "InternalError" ||
         *code == "ConditionalRequestConflict" || *code == "OperationAborted";
}

}  // namespace

S3Client::S3Client(S3Settings settings) : settings_(std::move(settings)) {
  InitCurlOnce();
  sigv4_ = "aws:amz:" + settings_.region + ":s3";
  userpwd_ = settings_.credentials.access_key_id + ":" + settings_.credentials.secret_access_key;
  session_token_ = settings_.credentials.session_token;
}

void S3Client::SetCredentials(S3Credentials credentials, int64_t expires_at_ms,
                              CredentialRefresh refresh) {
  std::lock_guard<std::mutex> lock(cred_mu_);
  userpwd_ = credentials.access_key_id + ":" + credentials.secret_access_key;
  session_token_ = credentials.session_token;
  expires_at_ms_ = expires_at_ms;
  refresh_ = std::move(refresh);
}

bool S3Client::HasRefresh() {
  std::lock_guard<std::mutex> lock(cred_mu_);
  return static_cast<bool>(refresh_);
}

std::pair<std::string, std::string> S3Client::Credentials(bool expired) {
  std::lock_guard<std::mutex> lock(cred_mu_);
  constexpr int64_t kMarginMs = 5 * 60 * 1000;
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  if (refresh_ && (expired || (expires_at_ms_ > 0 && now >= expires_at_ms_ - kMarginMs))) {
    auto fresh = refresh_();
    if (fresh.ok()) {
      userpwd_ = fresh->first.access_key_id + ":" + fresh->first.secret_access_key;
      session_token_ = fresh->first.session_token;
      expires_at_ms_ = fresh->second;
      FERRY_LOG(kDebug) << "new storage credentials for " << settings_.endpoint;
    } else {
      // The old ones are tried; the store's answer says the rest.
      FERRY_LOG(kWarn) << "could not refresh the storage credentials for " << settings_.endpoint
                       << ": " << fresh.status().message();
    }
  }
  return {userpwd_, session_token_};
}

S3Client::~S3Client() {
  for (void* c : idle_) curl_easy_cleanup(static_cast<CURL*>(c));
}

void* S3Client::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      void* c = idle_.back();
      idle_.pop_back();
      return c;
    }
  }
  return curl_easy_init();
}

void S3Client::Release(void* curl) {
  if (curl == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < kMaxIdleHandles) {
    idle_.push_back(curl);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(curl));
  }
}

std::string S3Client::UrlOf(const std::string& bucket, const std::string& key,
                            const std::vector<std::pair<std::string, std::string>>& query) const {
  // Virtual-hosted requests need a bucket name that is one DNS label (no '.', which TLS
  // certificates of *.s3.amazonaws.com do not cover).
  const bool path_style = settings_.path_style || bucket.find('.') != std::string::npos;
  std::string url;
  if (path_style) {
    url = settings_.endpoint + "/" + UriEncode(bucket, false) + "/" + UriEncode(key, true);
  } else {
    const size_t host = settings_.endpoint.find("://") + 3;
    url = settings_.endpoint.substr(0, host) + bucket + "." + settings_.endpoint.substr(host) +
          "/" + UriEncode(key, true);
  }
  // libcurl signs the query as written: the names sorted, every value encoded (SigV4's
  // canonical query string), "name=" for an empty value.
  char sep = '?';
  for (const auto& [name, value] : query) {
    url += sep;
    url += UriEncode(name, false) + "=" + UriEncode(value, false);
    sep = '&';
  }
  return url;
}

Status S3Client::SendOnce(void* handle, const Request& req, Response* resp,
                          std::string* curl_error) {
  CURL* c = static_cast<CURL*>(handle);
  curl_easy_reset(c);  // keeps the handle's connections
  char errbuf[CURL_ERROR_SIZE] = {0};
  const std::string url = UrlOf(req.bucket, req.key, req.query);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  const auto [userpwd, session_token] = Credentials(req.credentials_expired);
  curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4_.c_str());
  curl_easy_setopt(c, CURLOPT_USERPWD, userpwd.c_str());
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(settings_.config.connect_timeout_ms));
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME,
                   std::max(1L, static_cast<long>(settings_.config.timeout_ms / 1000)));
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);

  struct curl_slist* headers = nullptr;
  // The payload is not hashed into the signature (parts are streamed); TLS protects it on the way.
  headers = curl_slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  std::string token;
  if (!session_token.empty()) {
    token = "x-amz-security-token: " + session_token;
    headers = curl_slist_append(headers, token.c_str());
  }
  for (const auto& h : req.headers) headers = curl_slist_append(headers, h.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);

  ReadSource source{req.body, 0};
  if (req.method == "GET") {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  } else if (req.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (req.method == "PUT") {
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, OnRead);
    curl_easy_setopt(c, CURLOPT_READDATA, &source);
    curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, OnSeek);
    curl_easy_setopt(c, CURLOPT_SEEKDATA, &source);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else if (req.method == "POST") {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    // Never a null pointer: libcurl would then read the body from its read callback (stdin).
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.empty() ? "" : req.body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  WriteTarget write{c, req.sink, &resp->body};
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnWrite);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &write);
  HeaderTarget head;
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &head);

  const CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, static_cast<struct curl_slist*>(nullptr));
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, static_cast<char*>(nullptr));
  if (rc != CURLE_OK) {
    *curl_error = errbuf[0] != '\0' ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
    return Status::Unavailable(*curl_error);
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->http);
  resp->etag = std::move(head.etag);
  resp->content_length = head.content_length;
  return Status::OK();
}

Result<S3Client::Response> S3Client::Call(const Request& req) {
  const int max_attempts = std::max(1, settings_.config.max_attempts);
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string last;
  for (int attempt = 1;; ++attempt) {
    Response resp;
    resp.attempts = attempt;
    if (req.sink != nullptr) req.sink->clear();
    void* c = Acquire();
    if (c == nullptr) return Status::Internal("libcurl could not create a handle");
    std::string curl_error;
    Status sent = SendOnce(c, req, &resp, &curl_error);
    Release(c);
    if (sent.ok()) {
      // A 200 to CompleteMultipartUpload may still carry an error (the store failed late).
      const bool late_error = req.method == "POST" && resp.http == 200 &&
                              resp.body.find("<Error>") != std::string::npos;
      const auto code = XmlText(resp.body, "Code");
      // Expired credentials (vended ones outlived their life): new ones, then once more.
      if (resp.http == 403 && code &&
          (*code == "ExpiredToken" || *code == "TokenRefreshRequired") &&
          !req.credentials_expired && HasRefresh()) {
        Request again = req;
        again.credentials_expired = true;
        return Call(again);
      }
      if (!late_error && !Retryable(resp.http, resp.body)) return resp;
      last = "HTTP " + std::to_string(resp.http) + (code ? " " + *code : std::string());
    } else {
      last = curl_error;
    }
    if (attempt >= max_attempts) break;
    const int64_t cap = std::min(kBackoffMaxMs, kBackoffFirstMs << std::min(attempt - 1, 20));
    const int64_t wait_ms =
        cap / 2 + static_cast<int64_t>(rng() % static_cast<uint64_t>(cap / 2 + 1));
    FERRY_LOG(kDebug) << req.op << " s3://" << req.bucket << "/" << req.key << ": " << last
                      << "; retrying in " << wait_ms << " ms (attempt " << attempt + 1 << " of "
                      << max_attempts << ")";
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  }
  return Status::Unavailable(std::string(req.op) + " s3://" + req.bucket + "/" + req.key +
                             " failed " + std::to_string(max_attempts) +
                             " time(s), the last with " + last + " (S3 endpoint " +
                             settings_.endpoint +
                             "): check that the store is running and reachable, and "
                             "destination.s3.endpoint");
}

Status S3Client::ErrorOf(const Request& req, const Response& resp) const {
  const std::string code = XmlText(resp.body, "Code").value_or("");
  const std::string msg = XmlText(resp.body, "Message").value_or("");
  const std::string where = "s3://" + req.bucket + (req.key.empty() ? "" : "/" + req.key);
  const std::string what = std::string(req.op) + " " + where;
  const std::string said =
      code.empty() ? "HTTP " + std::to_string(resp.http) : code + (msg.empty() ? "" : ": " + msg);
  const std::string& creds = settings_.credentials.source;
  if (resp.http == 404 || code == "NoSuchBucket" || code == "NoSuchKey") {
    if (code == "NoSuchBucket") {
      return Status::NotFound("bucket '" + req.bucket + "' does not exist at " +
                              settings_.endpoint + " (" + what +
                              "): create it, or fix the bucket in destination.warehouse");
    }
    if (code == "NoSuchUpload") {
      return Status::NotFound(what + ": the multipart upload no longer exists (" + said + ")");
    }
    return Status::NotFound(where + " does not exist");
  }
  if (resp.http == 412) {
    return Status::AlreadyExists(where +
                                 " already exists: a conditional put (If-None-Match: *) found "
                                 "the key taken, and an existing file is never replaced");
  }
  if (code == "InvalidAccessKeyId") {
    return Status::PermissionDenied(what + ": the store does not know the access key id (" + said +
                                    "): check the credentials from " + creds);
  }
  if (code == "SignatureDoesNotMatch") {
    return Status::PermissionDenied(what +
                                    ": the secret access key does not match the access key id (" +
                                    said + "): check the secret of the credentials from " + creds);
  }
  if (code == "ExpiredToken" || code == "TokenRefreshRequired" || code == "InvalidToken") {
    return Status::PermissionDenied(what + ": the session token was refused (" + said +
                                    "): refresh the temporary credentials from " + creds);
  }
  if (code == "AuthorizationHeaderMalformed" || code == "PermanentRedirect" ||
      code == "IllegalLocationConstraintException" || resp.http == 301) {
    return Status::InvalidArgument(what + ": the bucket is in another region than " +
                                   settings_.region + " (" + said +
                                   "): set destination.s3.region (or AWS_REGION) to its region");
  }
  if (resp.http == 403) {
    return Status::PermissionDenied(what + " was denied (" + said + "): the credentials from " +
                                    creds + " lack the permission " + req.action + " on bucket " +
                                    req.bucket + "; grant it in the user's or the bucket's policy");
  }
  if (resp.http >= 400 && resp.http < 500) {
    return Status::InvalidArgument(what + " was refused (" + said + ")");
  }
  return Status::IOError(what + " failed (" + said + ")");
}

Status S3Client::GetRange(const S3Location& loc, uint64_t offset, uint64_t n, std::string* out) {
  Request req;
  req.op = "GetObject";
  req.action = "s3:GetObject";
  req.bucket = loc.bucket;
  req.key = loc.key;
  req.headers.push_back("Range: bytes=" + std::to_string(offset) + "-" +
                        std::to_string(offset + n - 1));
  out->reserve(n);
  req.sink = out;
  FERRY_ASSIGN_OR_RETURN(Response resp, Call(req));
  if (resp.http != 206 && resp.http != 200) return ErrorOf(req, resp);
  if (resp.http == 200) {  // the whole object (a store that ignores Range)
    if (out->size() < offset + n) {
      return Status::Corruption(loc.ToUri() + ": a read of " + std::to_string(n) +
                                " bytes at offset " + std::to_string(offset) +
                                " runs past its end (" + std::to_string(out->size()) + " bytes)");
    }
    *out = out->substr(offset, n);
  }
  if (out->size() != n) {
    return Status::Corruption(loc.ToUri() + ": asked for " + std::to_string(n) +
                              " bytes at offset " + std::to_string(offset) + ", got " +
                              std::to_string(out->size()));
  }
  return Status::OK();
}

Result<std::string> S3Client::Get(const S3Location& loc) {
  Request req;
  req.op = "GetObject";
  req.action = "s3:GetObject";
  req.bucket = loc.bucket;
  req.key = loc.key;
  std::string out;
  req.sink = &out;
  FERRY_ASSIGN_OR_RETURN(Response resp, Call(req));
  if (resp.http != 200) return ErrorOf(req, resp);
  return out;
}

Result<S3Head> S3Client::Head(const S3Location& loc) {
  Request req;
  req.op = "HeadObject";
  req.action = "s3:GetObject";
  req.method = "HEAD";
  req.bucket = loc.bucket;
  req.key = loc.key;
  FERRY_ASSIGN_OR_RETURN(Response resp, Call(req));
  if (resp.http != 200) return ErrorOf(req, resp);
  return S3Head{resp.content_length.value_or(0), resp.etag};
}

Status S3Client::Put(const S3Location& loc, std::string_view body, bool if_none_match) {
  Request req;
  req.op = "PutObject";
  req.action = "s3:PutObject";
  req.method = "PUT";
  req.bucket = loc.bucket;
  req.key = loc.key;
  req.body = body;
  req.headers.push_back("Content-Type: application/octet-stream");
  if (if_none_match) req.headers.push_back("If-None-Match: *");
  FERRY_ASSIGN_OR_RETURN(Response resp, Call(req));
  if (resp.http == 200) return Status::OK();
  if (resp.http == 412 && resp.attempts > 1) {
    // An earlier attempt may have landed with its answer lost: then the object holds our bytes.
    auto existing = Get(loc);
    if (existing.ok() && *existing == body) return Status::OK();
  }
  return ErrorOf(req, resp);
}

Status S3Client::Delete(const S3Location& loc) {
  Request req;
  req.op = "DeleteObject";
  req.action = "s3:DeleteObject";
  req.method = "DELETE";
  req.bucket = loc.bucket;
  req.key = loc.key;
  FERRY_ASSIGN_OR_RETURN(Response resp, Call(req));
  if (resp.http == 204 || resp.http == 200) return Status::OK();
  if (resp.http == 404 && XmlText(resp.body, "Code").value_or("NoSuchKey") == "NoSuchKey") {
    return Status::OK();
  }
  return ErrorOf(req, resp);
}

Result<std::vector<S3Object>> S3Client::List(const std::string& bucket, const std::string& prefix) {
  std::vector<S3Object> out;
  std::string token;
  for (int page = 0;; ++page) {
    Request req;
    req.op = "ListObjectsV2";
    req.action = "s3:ListBucket";
    req.bucket = bucket;
    if (!token.empty()) req.query.emplace_back("continuation-token", token);
    req.query.emplace_back("list-type", "2");
    req.query.emplace_back("prefix", prefix);
    FERRY_ASSIGN_OR_RETURN(Response resp, Call(req));
    if (resp.http != 200) return ErrorOf(req, resp);
    for (std::string_view item : XmlElements(resp.body, "Contents")) {
      S3Object o;
      o.key = XmlText(item, "Key").value_or("");
      o.size_bytes = std::strtoull(XmlText(item, "Size").value_or("0").c_str(), nullptr, 10);
      o.modified_ms = ParseIsoTimeMs(XmlText(item, "LastModified").value_or("")).value_or(0);
      if (!o.key.empty()) out.push_back(std::move(o));
    }
    const bool truncated = XmlText(resp.body, "IsTruncated").value_or("false") == "true";
    token = XmlText(resp.body, "NextContinuationToken").value_or("");
    if (!truncated) break;
    if (token.empty()) {
      return Status::IOError("ListObjectsV2 s3://" + bucket + "/" + prefix +
                             ": a truncated page without a continuation token");
    }
  }
  std::sort(out.begin(), out.end(),
            [](const S3Object& a, const S3Object& b) { return a.key < b.key; });
  return out;
}

Result<std::string> S3Client::CreateMultipartUpload(const S3Location& loc) {
  Request req;
  req.op = "CreateMultipartUpload";
  req.action = "s3:PutObject";
  req.method = "POST";
  req.bucket = loc.bucket;
  req.key = loc.key;
  req.query.emplace_back("uploads", "");
  req.headers.push_back("Content-Type: application/octet-stream");
  FERRY_ASSIGN_OR_RETURN(Response resp, Call(req));
  if (resp.http != 200) return ErrorOf(req, resp);
  auto id = XmlText(resp.body, "UploadId");
  if (!id || id->empty()) {
    return Status::IOError("CreateMultipartUpload " + loc.ToUri() + ": the answer has no UploadId");
  }
  return *id;
}

Result<std::string> S3Client::UploadPart(const S3Location& loc, const std::string& upload_id,
                                         int part_number, std::string_view body) {
  Request req;
  req.op = "UploadPart";
  req.action = "s3:PutObject";
  req.method = "PUT";
  req.bucket = loc.bucket;
  req.key = loc.key;
  req.query.emplace_back("partNumber", std::to_string(part_number));
  req.query.emplace_back("uploadId", upload_id);
  req.body = body;
  FERRY_ASSIGN_OR_RETURN(Response resp, Call(req));
  if (resp.http != 200) return ErrorOf(req, resp);
  if (resp.etag.empty()) {
    return Status::IOError("UploadPart " + loc.ToUri() + ": the answer has no ETag");
  }
  return resp.etag;
}

Status S3Client::CompleteMultipartUpload(const S3Location& loc, const std::string& upload_id,
                                         const std::vector<std::string>& etags, uint64_t size_bytes,
                                         bool if_none_match) {
  std::string body = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < etags.size(); ++i) {
    body += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
            XmlEscape(etags[i]) + "</ETag></Part>";
  }
  body += "</CompleteMultipartUpload>";
  Request req;
  req.op = "CompleteMultipartUpload";
  req.action = "s3:PutObject";
  req.method = "POST";
  req.bucket = loc.bucket;
  req.key = loc.key;
  req.query.emplace_back("uploadId", upload_id);
  req.body = body;
  req.headers.push_back("Content-Type: application/xml");
  if (if_none_match) req.headers.push_back("If-None-Match: *");
  FERRY_ASSIGN_OR_RETURN(Response resp, Call(req));
  if (resp.http == 200) return Status::OK();
  if (resp.attempts > 1 && (resp.http == 404 || resp.http == 412)) {
    // An earlier attempt completed the upload and its answer was lost: the object is there,
    // whole.
    auto head = Head(loc);
    if (head.ok() && head->size_bytes == size_bytes) return Status::OK();
  }
  return ErrorOf(req, resp);
}

Status S3Client::AbortMultipartUpload(const S3Location& loc, const std::string& upload_id) {
  Request req;
  req.op = "AbortMultipartUpload";
  req.action = "s3:AbortMultipartUpload";
  req.method = "DELETE";
  req.bucket = loc.bucket;
  req.key = loc.key;
  req.query.emplace_back("uploadId", upload_id);
  FERRY_ASSIGN_OR_RETURN(Response resp, Call(req));
  if (resp.http == 204 || resp.http == 200) return Status::OK();
  if (resp.http == 404) return Status::OK();  // already gone
  return ErrorOf(req, resp);
}

Result<std::vector<S3Upload>> S3Client::ListMultipartUploads(const std::string& bucket,
                                                             const std::string& prefix) {
  std::vector<S3Upload> out;
  std::string key_marker, id_marker;
  for (;;) {
    Request req;
    req.op = "ListMultipartUploads";
    req.action = "s3:ListBucketMultipartUploads";
    req.bucket = bucket;
    if (!key_marker.empty()) req.query.emplace_back("key-marker", key_marker);
    req.query.emplace_back("prefix", prefix);
    if (!id_marker.empty()) req.query.emplace_back("upload-id-marker", id_marker);
    req.query.emplace_back("uploads", "");
    FERRY_ASSIGN_OR_RETURN(Response resp, Call(req));
    if (resp.http != 200) return ErrorOf(req, resp);
    for (std::string_view item : XmlElements(resp.body, "Upload")) {
      S3Upload u;
      u.key = XmlText(item, "Key").value_or("");
      u.upload_id = XmlText(item, "UploadId").value_or("");
      u.initiated_ms = ParseIsoTimeMs(XmlText(item, "Initiated").value_or("")).value_or(0);
      if (!u.key.empty() && !u.upload_id.empty()) out.push_back(std::move(u));
    }
    if (XmlText(resp.body, "IsTruncated").value_or("false") != "true") break;
    key_marker = XmlText(resp.body, "NextKeyMarker").value_or("");
    id_marker = XmlText(resp.body, "NextUploadIdMarker").value_or("");
    if (key_marker.empty() && id_marker.empty()) {
      return Status::IOError("ListMultipartUploads s3://" + bucket + "/" + prefix +
                             ": a truncated page without a marker");
    }
  }
  return out;
}

}  // namespace ferry::lake
