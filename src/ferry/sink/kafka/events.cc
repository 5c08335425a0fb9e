#include "ferry/sink/kafka/events.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>

#include "ferry/sink/sink_util.h"
#include "ferry/types/value_json.h"
#include "ferry/types/value_parse.h"
#include "ferry/types/value_text.h"

namespace ferry::sink::kafka {
namespace {

bool TopicChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

template <typename T>
void AppendFloat(T v, std::string* out) {
  if (std::isnan(v)) {
    out->append("\"NaN\"");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  } else if (v == 0 && std::signbit(v)) {
    out->append("-0.0");  // "-0" reads back as the integer 0 in many parsers
  } else {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out->append(buf, r.ptr);
  }
}

template <typename T>
void AppendInt(T v, std::string* out) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

}  // namespace

Result<std::string> TopicName(std::string_view templ, const std::string& pipeline,
                              const std::string& table) {
  const size_t dot = table.rfind('.');
  const std::string schema = dot == std::string::npos ? "" : table.substr(0, dot);
  const std::string name = dot == std::string::npos ? table : table.substr(dot + 1);
  std::string raw;
  for (size_t i = 0; i < templ.size(); ++i) {
    if (templ[i] != '{') {
      raw += templ[i];
      continue;
    }
    const size_t end = templ.find('}', i);
    const std::string_view key =
        end == std::string_view::npos ? templ.substr(i) : templ.substr(i + 1, end - i - 1);
    if (end == std::string_view::npos ||
        (key != "pipeline" && key != "table" && key != "schema" && key != "name")) {
      return Status::InvalidArgument(
          "destination.topic '" + std::string(templ) + "' has an unknown placeholder '" +
          std::string(templ.substr(
              i, end == std::string_view::npos ? std::string_view::npos : end - i + 1)) +
          "'; it may use {pipeline}, {table}, {schema} and {name}");
    }
    raw += key == "pipeline" ? pipeline : key == "table" ? table : key == "schema" ? schema : name;
    i = end;
  }
  std::string topic;
  topic.reserve(raw.size());
  for (char c : raw) topic += TopicChar(c) ? c : '_';
  if (topic.empty() || topic == "." || topic == ".." || topic.size() > 249) {
    return Status::InvalidArgument("destination.topic '" + std::string(templ) + "' makes '" +
                                   topic + "' for table " + table +
                                   ", which is not a Kafka topic name (1 to 249 characters, not "
                                   "'.' or '..'); change the template");
  }
  return topic;
}

Status AppendJsonString(std::string_view s, std::string* out) {
  if (!ValidUtf8(s)) return Status::InvalidArgument("text that is not UTF-8");
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t run = 0;  // bytes copied as they are, pending
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default: {
        const char u[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out->append(u, sizeof u);
      }
    }
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
  return Status::OK();
}

Status AppendJsonValue(const Column& col, size_t row, std::string* out) {
  if (!col.IsValid(row)) {
    out->append("null");
    return Status::OK();
  }
  switch (col.type().kind()) {
    case TypeKind::kBoolean:
      out->append(col.ValueAt<uint8_t>(row) != 0 ? "true" : "false");
      return Status::OK();
    case TypeKind::kInt32:
      AppendInt(col.ValueAt<int32_t>(row), out);
      return Status::OK();
    case TypeKind::kInt64:
      AppendInt(col.ValueAt<int64_t>(row), out);
      return Status::OK();
    case TypeKind::kFloat32:
      AppendFloat(col.ValueAt<float>(row), out);
      return Status::OK();
    case TypeKind::kFloat64:
      AppendFloat(col.ValueAt<double>(row), out);
      return Status::OK();
    case TypeKind::kDecimal:
    case TypeKind::kDate:
    case TypeKind::kTime:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
    case TypeKind::kUuid:
      return AppendJsonString(*FormatTextValue(col, row), out);
    case TypeKind::kString:
      return AppendJsonString(col.GetBytes(row), out);
    case TypeKind::kBinary:
      return AppendJsonString(FormatBase64(col.GetBytes(row)), out);
    case TypeKind::kList: {
      FERRY_ASSIGN_OR_RETURN(std::string json,
                             FormatListJson(col, row, [](const Column& c, size_t i) {
                               return Result<std::string>(*FormatTextValue(c, i));
                             }));
      out->append(json);
      return Status::OK();
    }
  }
  return Status::Internal("a value of an unknown type");
}

Status AppendFromJson(const nlohmann::json& v, Column* col) {
  if (v.is_null()) {
    col->AppendNull();
    return Status::OK();
  }
  const auto bad = [&]() {
    return Status::InvalidArgument(v.dump() + " is not a " + col->type().ToIceberg());
  };
  switch (col->type().kind()) {
    case TypeKind::kBoolean:
      if (!v.is_boolean()) return bad();
      col->AppendBool(v.get<bool>());
      return Status::OK();
    case TypeKind::kInt32:
    case TypeKind::kInt64: {
      if (!v.is_number_integer()) return bad();
      if (v.is_number_unsigned() &&
          v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return bad();
      }
      const int64_t x = v.get<int64_t>();
      if (col->type().kind() == TypeKind::kInt64) {
        col->AppendInt64(x);
      } else if (x < std::numeric_limits<int32_t>::min() ||
                 x > std::numeric_limits<int32_t>::max()) {
        return bad();
      } else {
        col->AppendInt32(static_cast<int32_t>(x));
      }
      return Status::OK();
    }
    case TypeKind::kFloat32:
    case TypeKind::kFloat64: {
      double x = 0;
      if (v.is_number()) {
        x = v.get<double>();
      } else if (v == "NaN") {
        x = std::numeric_limits<double>::quiet_NaN();
      } else if (v == "Infinity" || v == "-Infinity") {
        x = v == "Infinity" ? INFINITY : -INFINITY;
      } else {
        return bad();
      }
      if (col->type().kind() == TypeKind::kFloat32) {
        // The float's shortest text reads back as the same float.
        col->AppendFloat(v.is_number() ? std::strtof(v.dump().c_str(), nullptr)
                                       : static_cast<float>(x));
      } else {
        col->AppendDouble(x);
      }
      return Status::OK();
    }
    case TypeKind::kDecimal:
    case TypeKind::kDate:
    case TypeKind::kTime:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
    case TypeKind::kUuid: {
      if (!v.is_string()) return bad();
      Status s = AppendTextValue(v.get<std::string>(), col);
      return s.ok() ? s : bad();
    }
    case TypeKind::kString:
      if (!v.is_string()) return bad();
      col->AppendBytes(v.get<std::string>());
      return Status::OK();
    case TypeKind::kBinary: {
      auto bytes = v.is_string() ? ParseBase64(v.get<std::string>()) : std::nullopt;
      if (!bytes) return bad();
      col->AppendBytes(*bytes);
      return Status::OK();
    }
    case TypeKind::kList:
      if (!v.is_array()) return bad();
      return AppendListJson(v.dump(), col, AppendTextValue);
  }
  return Status::Internal("a value of an unknown type");
}

EventEncoder::EventEncoder(std::shared_ptr<const Schema> schema, Format format,
                           std::string pipeline, std::string table)
    : schema_(std::move(schema)), format_(format) {
  keys_ = KeyPositions(*schema_);
  for (size_t i = 0; i < schema_->fields.size(); ++i) {
    all_.push_back(i);
    std::string n;
    // Column names and table names come from the source's catalog: UTF-8 (a name that is not
    // cannot be quoted, and is written as it is).
    if (!AppendJsonString(schema_->fields[i].name, &n).ok()) n = "\"?\"";
    names_.push_back(n + ":");
  }
  std::string p, t;
  if (!AppendJsonString(pipeline, &p).ok()) p = "null";
  if (!AppendJsonString(table, &t).ok()) t = "null";
  source_head_ = "{\"pipeline\":" + p + ",\"table\":" + t;
}

Status EventEncoder::Object(const Batch& b, size_t row, const std::vector<size_t>& cols, bool close,
                            std::string* out) const {
  out->push_back('{');
  bool first = true;
  for (size_t i : cols) {
    if (!first) out->push_back(',');
    first = false;
    out->append(names_[i]);
    Status s = AppendJsonValue(b.column(i), row, out);
    if (!s.ok()) {
      return Status::InvalidArgument("column " + schema_->fields[i].name + " holds " + s.message() +
                                     "; Kafka events are JSON, which holds UTF-8");
    }
  }
  if (close) out->push_back('}');
  return Status::OK();
}

Status EventEncoder::Key(const Batch& b, size_t row, std::string* out) const {
  out->clear();
  if (keys_.empty()) return Status::OK();
  return Object(b, row, keys_, /*close=*/true, out);
}

void EventEncoder::Source(const EventSource& src, std::string* out) const {
  out->append(source_head_);
  out->append(",\"position\":");
  if (src.position.empty()) {
    out->append("null");
  } else {
    (void)AppendJsonString(src.position, out);  // positions are ASCII
  }
  out->append(",\"ts_ms\":");
  if (src.commit_us == INT64_MIN) {
    out->append("null,\"ts_us\":null");
  } else {
    // Floor division: times before 1970 round down, as the microseconds do.
    const int64_t ms = src.commit_us / 1000 - (src.commit_us % 1000 < 0 ? 1 : 0);
    AppendInt(ms, out);
    out->append(",\"ts_us\":");
    AppendInt(src.commit_us, out);
  }
  out->append(src.snapshot ? ",\"snapshot\":true,\"commit\":\""
                           : ",\"snapshot\":false,\"commit\":\"");
  out->append(src.commit);  // hex digits
  out->append("\"}");
}

Status EventEncoder::Row(const Batch& b, size_t row, const EventSource& src, int64_t now_ms,
                         std::string* out) const {
  out->clear();
  if (format_ == Format::kFlat) {
    FERRY_RETURN_IF_ERROR(Object(b, row, all_, /*close=*/false, out));
    out->append(all_.empty() ? "\"__op\":\"" : ",\"__op\":\"");
    out->push_back(src.op);
    out->append("\",\"__deleted\":false,\"__commit\":\"");
    out->append(src.commit);
    out->append("\"}");
    return Status::OK();
  }
  out->append("{\"before\":null,\"after\":");
  FERRY_RETURN_IF_ERROR(Object(b, row, all_, /*close=*/true, out));
  out->append(",\"op\":\"");
  out->push_back(src.op);
  out->append("\",\"source\":");
  Source(src, out);
  out->append(",\"ts_ms\":");
  AppendInt(now_ms, out);
  out->push_back('}');
  return Status::OK();
}

Status EventEncoder::Delete(const Batch& b, size_t row, const EventSource& src, int64_t now_ms,
                            std::string* out) const {
  out->clear();
  if (format_ == Format::kFlat) {
    FERRY_RETURN_IF_ERROR(Object(b, row, keys_, /*close=*/false, out));
    out->append(keys_.empty() ? "\"__op\":\"d\",\"__deleted\":true,\"__commit\":\""
                              : ",\"__op\":\"d\",\"__deleted\":true,\"__commit\":\"");
    out->append(src.commit);
    out->append("\"}");
    return Status::OK();
  }
  out->append("{\"before\":");
  FERRY_RETURN_IF_ERROR(Object(b, row, keys_, /*close=*/true, out));
  out->append(",\"after\":null,\"op\":\"d\",\"source\":");
  Source(src, out);
  out->append(",\"ts_ms\":");
  AppendInt(now_ms, out);
  out->push_back('}');
  return Status::OK();
}

}  // namespace ferry::sink::kafka
