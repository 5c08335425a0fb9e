#include "ferry/lake/s3_settings.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>

#include "ferry/base/fs.h"

namespace ferry::lake {
namespace {

std::string Trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// One section of an AWS shared file: its keys, and the keys of its indented sub-sections
// ("s3 =" followed by indented "endpoint_url = ...") as "s3.endpoint_url".
using IniSection = std::map<std::string, std::string>;
using IniFile = std::map<std::string, IniSection>;

IniFile ParseIni(const std::string& text) {
  IniFile out;
  IniSection* current = nullptr;
  std::string sub;  // the open sub-section's name, while its lines are indented
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string raw = text.substr(pos, end - pos);
    pos = end + 1;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    const bool indented = !raw.empty() && (raw[0] == ' ' || raw[0] == '\t');
    std::string line = Trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      current = &out[Trim(line.substr(1, line.size() - 2))];
      sub.clear();
      continue;
    }
    if (current == nullptr) continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = Lower(Trim(line.substr(0, eq)));
    std::string value = Trim(line.substr(eq + 1));
    if (!indented) sub.clear();
    if (indented && !sub.empty()) {
      (*current)[sub + "." + key] = value;
    } else if (value.empty()) {
      sub = key;  // "s3 =": the indented lines below belong to it
    } else {
      (*current)[key] = value;
    }
  }
  return out;
}

struct SharedFiles {
  IniSection credentials;  // the profile's section of the credentials file
  IniSection config;       // ... and of the config file
  bool found = false;      // the profile exists in either
  std::string credentials_path, config_path;
};

Result<SharedFiles> ReadProfile(const std::string& profile, const EnvLookup& env) {
  SharedFiles out;
  const std::string home = env("HOME").value_or("");
  out.credentials_path =
      env("AWS_SHARED_CREDENTIALS_FILE").value_or(home.empty() ? "" : home + "/.aws/credentials");
  out.config_path = env("AWS_CONFIG_FILE").value_or(home.empty() ? "" : home + "/.aws/config");
  auto read = [](const std::string& path) -> Result<IniFile> {
    if (path.empty() || !FileExists(path)) return IniFile{};
    FERRY_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    return ParseIni(text);
  };
  FERRY_ASSIGN_OR_RETURN(IniFile creds, read(out.credentials_path));
  FERRY_ASSIGN_OR_RETURN(IniFile config, read(out.config_path));
  if (auto it = creds.find(profile); it != creds.end()) {
    out.credentials = it->second;
    out.found = true;
  }
  const std::string section = profile == "default" ? "default" : "profile " + profile;
  if (auto it = config.find(section); it != config.end()) {
    out.config = it->second;
    out.found = true;
  }
  return out;
}

std::optional<std::string> NonEmpty(std::optional<std::string> v) {
  if (v && v->empty()) return std::nullopt;
  return v;
}

std::optional<std::string> Key(const IniSection& s, const std::string& key) {
  auto it = s.find(key);
  if (it == s.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

std::string S3Settings::Describe() const {
  return "endpoint " + endpoint + ", region " + region + ", " +
         (path_style ? "path-style" : "virtual-hosted") + " requests, credentials from " +
         credentials.source;
}

Result<S3Settings> ResolveS3Settings(const S3Config& config, const EnvLookup& env) {
  S3Settings s;
  s.config = config;
  const std::optional<std::string> named_profile = NonEmpty(env("AWS_PROFILE"));
  const std::string profile = named_profile.value_or("default");
  FERRY_ASSIGN_OR_RETURN(SharedFiles files, ReadProfile(profile, env));
  if (named_profile && !files.found) {
    return Status::InvalidArgument("AWS_PROFILE is '" + profile + "', but neither " +
                                   files.credentials_path + " (section [" + profile + "]) nor " +
                                   files.config_path + " (section [profile " + profile +
                                   "]) has it: add the profile or unset AWS_PROFILE");
  }

  // Credentials.
  auto key_id = NonEmpty(env("AWS_ACCESS_KEY_ID"));
  auto secret = NonEmpty(env("AWS_SECRET_ACCESS_KEY"));
  if (key_id || secret) {
    if (!key_id || !secret) {
      return Status::InvalidArgument(
          std::string(key_id ? "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"
                             : "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not") +
          ": set both, or neither to use the profile in ~/.aws/credentials");
    }
    s.credentials = {*key_id, *secret, NonEmpty(env("AWS_SESSION_TOKEN")).value_or(""),
                     "the environment (AWS_ACCESS_KEY_ID)"};
  } else {
    for (const auto* section : {&files.credentials, &files.config}) {
      auto id = Key(*section, "aws_access_key_id");
      auto sk = Key(*section, "aws_secret_access_key");
      if (!id || !sk) continue;
      const bool in_credentials = section == &files.credentials;
      s.credentials = {*id, *sk, Key(*section, "aws_session_token").value_or(""),
                       "profile '" + profile + "' in " +
                           (in_credentials ? files.credentials_path : files.config_path)};
      break;
    }
    if (s.credentials.access_key_id.empty()) {
      return Status::InvalidArgument(
          "no AWS credentials for the s3:// warehouse: set AWS_ACCESS_KEY_ID and "
          "AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials), or put "
          "aws_access_key_id and aws_secret_access_key in profile '" +
          profile + "' of " +
          (files.credentials_path.empty() ? "~/.aws/credentials" : files.credentials_path) +
          " (AWS_PROFILE picks the profile)");
    }
  }

  // Region and endpoint.
  s.region = config.region.value_or("");
  if (s.region.empty()) {
    s.region = NonEmpty(env("AWS_REGION"))
                   .value_or(NonEmpty(env("AWS_DEFAULT_REGION"))
                                 .value_or(Key(files.config, "region").value_or("us-east-1")));
  }
  std::optional<std::string> endpoint = NonEmpty(config.endpoint);
  if (!endpoint) endpoint = NonEmpty(env("AWS_ENDPOINT_URL_S3"));
  if (!endpoint) endpoint = NonEmpty(env("AWS_ENDPOINT_URL"));
  if (!endpoint) endpoint = Key(files.config, "s3.endpoint_url");
  if (!endpoint) endpoint = Key(files.config, "endpoint_url");
  const bool custom = endpoint.has_value();
  s.endpoint = endpoint.value_or("https://s3." + s.region + ".amazonaws.com");
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
  const std::string lower = Lower(s.endpoint);
  const size_t host_at = lower.rfind("https://", 0) == 0  ? 8
                         : lower.rfind("http://", 0) == 0 ? 7
                                                          : 0;
  if (host_at == 0 || s.endpoint.size() == host_at ||
      s.endpoint.find('/', host_at) != std::string::npos ||
      s.endpoint.find_first_of("?#@ ", host_at) != std::string::npos) {
    return Status::InvalidArgument(
        "the S3 endpoint '" + s.endpoint +
        "' is not an http:// or https:// URL of a host (and port), such as "
        "http://127.0.0.1:9000 or https://s3.eu-west-1.amazonaws.com: fix destination.s3.endpoint "
        "or AWS_ENDPOINT_URL(_S3)");
  }
  if (config.path_style) {
    s.path_style = *config.path_style;
  } else if (auto style = Key(files.config, "s3.addressing_style"); style && *style != "auto") {
    s.path_style = *style == "path";
  } else {
    s.path_style = custom;
  }
  return s;
}

std::optional<VendedS3> VendedS3Of(const std::map<std::string, std::string>& config) {
  auto get = [&](const char* key) -> std::optional<std::string> {
    auto it = config.find(key);
    if (it == config.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
  auto id = get("s3.access-key-id");
  auto secret = get("s3.secret-access-key");
  if (!id || !secret) return std::nullopt;
  VendedS3 v;
  v.credentials.access_key_id = *id;
  v.credentials.secret_access_key = *secret;
  v.credentials.session_token = get("s3.session-token").value_or("");
  v.credentials.source = "credentials vended by the catalog";
  if (auto e = get("s3.session-token-expires-at-ms")) {
    v.expires_at_ms = std::strtoll(e->c_str(), nullptr, 10);
  }
  v.endpoint = get("s3.endpoint");
  v.region = get("client.region");
  if (!v.region) v.region = get("s3.region");
  if (auto ps = get("s3.path-style-access")) v.path_style = *ps == "true" || *ps == "TRUE";
  return v;
}

}  // namespace ferry::lake
