#include "ferry/sink/redis/redis_sink.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/sink/redis/resp.h"
#include "ferry/sink/sink_util.h"
#include "ferry/types/type_change.h"
#include "ferry/types/value_json.h"
#include "ferry/types/value_parse.h"
#include "ferry/types/value_text.h"

namespace ferry::sink {
namespace redis {
namespace {

constexpr std::string_view kNaN = "NaN";
constexpr std::string_view kInfinity = "Infinity";
constexpr std::string_view kMinusInfinity = "-Infinity";

// The shortest text that reads back as `v` (at T's width), or the special forms.
template <typename T>
void AppendFloatText(T v, std::string* out) {
  if (std::isnan(v)) {
    out->append(kNaN);
  } else if (std::isinf(v)) {
    out->append(v > 0 ? kInfinity : kMinusInfinity);
  } else {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out->append(buf, r.ptr);
  }
}

template <typename T>
std::optional<T> ParseFloatText(std::string_view t) {
  if (t == kNaN) return std::numeric_limits<T>::quiet_NaN();
  if (t == kInfinity) return std::numeric_limits<T>::infinity();
  if (t == kMinusInfinity) return -std::numeric_limits<T>::infinity();
  if (t.empty() || t[0] == '+' || t.find_first_of("iInN") != std::string_view::npos) {
    return std::nullopt;  // from_chars would read "inf" and "nan" too
  }
  T v{};
  auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return std::nullopt;
  return v;
}

template <typename T>
std::optional<T> ParseIntText(std::string_view t) {
  if (t.empty() || t[0] == '+') return std::nullopt;
  T v{};
  auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return std::nullopt;
  return v;
}

}  // namespace

Status AppendValueText(const Column& col, size_t row, std::string* out) {
  switch (col.type().kind()) {
    case TypeKind::kBoolean:
      out->append(col.ValueAt<uint8_t>(row) != 0 ? "true" : "false");
      return Status::OK();
    case TypeKind::kInt32:
      out->append(std::to_string(col.ValueAt<int32_t>(row)));
      return Status::OK();
    case TypeKind::kInt64:
      out->append(std::to_string(col.ValueAt<int64_t>(row)));
      return Status::OK();
    case TypeKind::kFloat32:
      AppendFloatText(col.ValueAt<float>(row), out);
      return Status::OK();
    case TypeKind::kFloat64:
      AppendFloatText(col.ValueAt<double>(row), out);
      return Status::OK();
    case TypeKind::kDecimal:
    case TypeKind::kDate:
    case TypeKind::kTime:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
    case TypeKind::kUuid:
      out->append(*FormatTextValue(col, row));
      return Status::OK();
    case TypeKind::kString:
    case TypeKind::kBinary:
      out->append(col.GetBytes(row));
      return Status::OK();
    case TypeKind::kList: {
      FERRY_ASSIGN_OR_RETURN(
          std::string json, FormatListJson(col, row, [](const Column& c, size_t i) {
            std::string text;
            Status s = AppendValueText(c, i, &text);
            return s.ok() ? Result<std::string>(std::move(text)) : Result<std::string>(s);
          }));
      out->append(json);
      return Status::OK();
    }
  }
  return Status::Internal("a value of an unknown type");
}

Status AppendFromValueText(std::string_view text, Column* col) {
  const DataType& t = col->type();
  auto bad = [&]() { return Status::InvalidArgument(""); };
  switch (t.kind()) {
    case TypeKind::kBoolean:
      if (text != "true" && text != "false") return bad();
      col->AppendBool(text == "true");
      return Status::OK();
    case TypeKind::kInt32: {
      auto v = ParseIntText<int32_t>(text);
      if (!v) return bad();
      col->AppendInt32(*v);
      return Status::OK();
    }
    case TypeKind::kInt64: {
      auto v = ParseIntText<int64_t>(text);
      if (!v) return bad();
      col->AppendInt64(*v);
      return Status::OK();
    }
    case TypeKind::kFloat32: {
      auto v = ParseFloatText<float>(text);
      if (!v) return bad();
      col->AppendFloat(*v);
      return Status::OK();
    }
    case TypeKind::kFloat64: {
      auto v = ParseFloatText<double>(text);
      if (!v) return bad();
      col->AppendDouble(*v);
      return Status::OK();
    }
    case TypeKind::kDecimal:
    case TypeKind::kDate:
    case TypeKind::kTime:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
    case TypeKind::kUuid:
      return AppendTextValue(text, col);
    case TypeKind::kString:
    case TypeKind::kBinary:
      col->AppendBytes(text);
      return Status::OK();
    case TypeKind::kList:
      return AppendListJson(text, col, AppendFromValueText);
  }
  return Status::Internal("a value of an unknown type");
}

std::string EscapeKeyPart(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == ':' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string EscapeGlob(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace redis

namespace {

using redis::AppendArrayHeader;
using redis::AppendBulk;
using redis::AppendCommand;
using redis::Connection;
using redis::Endpoint;
using redis::EscapeGlob;
using redis::EscapeKeyPart;
using redis::Reply;

constexpr size_t kReadBatchRows = 8192;
constexpr size_t kScanCount = 1000;  // keys a SCAN step asks for; keys per SADD/DEL/SMISMEMBER
constexpr int kExecAttempts = 3;     // EXEC answering nil (the checkpoint changed) is retried
constexpr size_t kShownBytes = 80;   // of a key or value in a message

struct Settings {
  Endpoint endpoint;
  std::string prefix;
  std::string pipeline;
};

// A key or value for a message: printable ASCII as is, other bytes as \xNN, cut at kShownBytes.
std::string Shown(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < kShownBytes; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else if (c >= 0x80) {
      out += static_cast<char>(c);  // UTF-8 stays readable
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > kShownBytes) out += "...";
  return "'" + out + "'";
}

// ---- keys ----

class Keys {
 public:
  Keys(std::string prefix, const std::string& pipeline)
      : prefix_(std::move(prefix)), pipeline_(EscapeKeyPart(pipeline)) {}

  // "<prefix>:<stream part>:" — every row key of the stream starts with it.
  std::string RowPrefix(const std::string& stream) const {
    return prefix_ + ":" + EscapeKeyPart(stream) + ":";
  }
  std::string RowPattern(const std::string& stream) const {
    return EscapeGlob(RowPrefix(stream)) + "*";
  }
  std::string Checkpoint(const std::string& stream) const {
    return prefix_ + ":ferry_state:" + pipeline_ + ":" + EscapeKeyPart(stream);
  }
  std::string SchemaRecord(const std::string& stream) const {
    return prefix_ + ":ferry_schema:" + EscapeKeyPart(stream);
  }
  std::string LoadSet(const std::string& stream, const std::string& run) const {
    return prefix_ + ":ferry_load:" + pipeline_ + ":" + EscapeKeyPart(stream) + ":" +
           EscapeKeyPart(run);
  }
  std::string LoadRuns(const std::string& stream) const {
    return prefix_ + ":ferry_loads:" + pipeline_ + ":" + EscapeKeyPart(stream);
  }

 private:
  std::string prefix_;
  std::string pipeline_;  // escaped
};

bool ReservedStream(const std::string& s) {
  return s == "ferry_state" || s == "ferry_schema" || s == "ferry_load" || s == "ferry_loads";
}

// ---- the schema record ----

Result<std::string> RecordText(const std::string& pipeline, const Schema& s) {
  Json rec = {{"pipeline", pipeline}, {"key", KeyNames(s)}, {"columns", ColumnsJson(s)}};
  return DumpJson(rec, "the column names");
}

struct TableRecord {
  std::string pipeline;
  Schema schema;
};

Result<TableRecord> ParseRecord(const std::string& text, const std::string& key) {
  auto bad = [&](const std::string& why) {
    return Status::Corruption("schema key " + Shown(key) + " " + why +
                              "; delete it and the table's keys, then sync again");
  };
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("columns") || !j["columns"].is_array() ||
      !j.contains("pipeline") || !j["pipeline"].is_string()) {
    return bad("does not hold ferry's schema record (JSON with pipeline and columns)");
  }
  TableRecord r;
  r.pipeline = j["pipeline"].get<std::string>();
  try {
    int32_t id = 0;
    for (const Json& c : j["columns"]) {
      auto f = FieldFromColumnsEntry(c, ++id);
      if (!f.ok()) {
        return bad(f.status().code() == StatusCode::kNotSupported
                       ? "names an unknown type '" + f.status().message() + "'"
                       : "has a column without a name and a type: " + f.status().message());
      }
      r.schema.fields.push_back(std::move(*f));
    }
    for (Field& f : r.schema.fields) {
      if (f.type.is_list()) f.type = f.type.WithElementId(++id);
    }
    if (j.contains("key")) {
      for (const Json& k : j["key"]) {
        const Field* f = k.is_string() ? r.schema.FindByName(k.get<std::string>()) : nullptr;
        if (f == nullptr) return bad("names a key column it does not have: " + k.dump());
        r.schema.identifier_field_ids.push_back(f->id);
      }
    }
  } catch (const Json::exception& e) {
    return bad(std::string("does not have the expected form: ") + e.what());
  }
  if (r.schema.fields.empty()) return bad("has no columns");
  return r;
}

std::string FixText(const std::string& table) {
  return "run a full refresh of the stream (which rewrites every row), or delete the keys " +
         table + ":* and its schema key so that ferry starts the table again";
}

// The record after rows of `source` are written where `old` was recorded: the evolutions the
// header lists, or kInvalidArgument naming the column and the fix.
Result<Schema> Evolve(const Schema& old, const Schema& source, const std::string& table) {
  std::vector<std::string> old_key = KeyNames(old), new_key = KeyNames(source);
  if (old_key != new_key) {
    return Status::InvalidArgument(
        "the key of table " + table + " is " + JoinNames(old_key) + " and the source's is " +
        JoinNames(new_key) +
        "; the key is part of every row's Redis key, so it cannot change in place: " +
        FixText(table));
  }
  Schema out;
  for (const Field& f : source.fields) {
    Field n = f;
    const Field* o = old.FindByName(f.name);
    if (o != nullptr) {
      auto t = EvolvedType(o->type, f.type);
      if (!t) {
        return Status::InvalidArgument(
            "column " + f.name + " of table " + table + " is " + o->type.ToIceberg() +
            " in the table and " + f.type.ToIceberg() +
            " in the source; ferry only widens int to long, float to double and a decimal's "
            "precision in a table it updates: " +
            FixText(table));
      }
      n.type = *t;
      n.required = o->required && f.required;
    } else {
      n.required = false;  // older rows lack it
    }
    out.fields.push_back(std::move(n));
  }
  for (const Field& o : old.fields) {
    if (source.FindByName(o.name) != nullptr) continue;
    Field kept = o;
    kept.required = false;  // new rows lack it
    out.fields.push_back(std::move(kept));
  }
  int32_t id = 0;
  for (Field& f : out.fields) f.id = ++id;
  for (Field& f : out.fields) {
    if (f.type.is_list()) f.type = f.type.WithElementId(++id);
  }
  for (const auto& k : new_key) out.identifier_field_ids.push_back(out.FindByName(k)->id);
  return out;
}

// ---- small helpers over a connection ----

Result<Json> ParseMarker(const Reply& r, const std::string& key) {
  if (r.IsNil()) return Json(nullptr);
  if (r.type != Reply::Type::kBulk) {
    return Status::Corruption("checkpoint key " + Shown(key) + " holds a " + r.Describe() +
                              ", not ferry's marker");
  }
  Json j = Json::parse(r.str, nullptr, false);
  if (j.is_discarded()) {
    return Status::Corruption("checkpoint key " + Shown(key) + " holds " + Shown(r.str) +
                              ", which is not JSON; delete the key to start the table over");
  }
  return j;
}

std::string Where(const Endpoint& e) { return "Redis at " + e.HostPort(); }

// Replies of a pipeline, collected; the first error reply becomes the status (naming names[i]).
struct Collected {
  std::vector<Reply> replies;
  Status first_error;
};

Result<Collected> RunAll(Connection* c, const std::string& buf,
                         const std::vector<std::string>& names, std::string_view what) {
  Collected out;
  out.replies.reserve(names.size());
  FERRY_RETURN_IF_ERROR(c->Pipeline(
      {buf}, names.size(),
      [&](size_t i, Reply& r) {
        if (r.IsError() && out.first_error.ok()) {
          out.first_error = redis::ErrorReplyStatus(names[i], r, Where(c->endpoint()));
        }
        out.replies.push_back(std::move(r));
        return Status::OK();
      },
      what));
  if (!out.first_error.ok()) return out.first_error.WithContext(what);
  return out;
}

// One SCAN step: the next cursor and the keys.
Status ScanStep(Connection* c, std::string* cursor, const std::string& pattern,
                std::vector<std::string>* keys, std::string_view what) {
  FERRY_ASSIGN_OR_RETURN(Reply r, c->Command({"SCAN", *cursor, "MATCH", pattern, "COUNT",
                                              std::to_string(kScanCount)}));
  if (r.type != Reply::Type::kArray || r.elements.size() != 2 ||
      r.elements[0].type != Reply::Type::kBulk || r.elements[1].type != Reply::Type::kArray) {
    return Status::Corruption(Where(c->endpoint()) + " answered SCAN with a " + r.Describe() +
                              " while " + std::string(what));
  }
  *cursor = r.elements[0].str;
  keys->clear();
  for (Reply& k : r.elements[1].elements) keys->push_back(std::move(k.str));
  return Status::OK();
}

// ---- the reader ----

class RedisReader final : public TableReader {
 public:
  RedisReader(std::unique_ptr<Connection> conn, std::string table, std::string pattern,
              std::shared_ptr<const Schema> schema)
      : conn_(std::move(conn)),
        table_(std::move(table)),
        pattern_(std::move(pattern)),
        schema_(std::move(schema)) {
    for (size_t i = 0; i < schema_->fields.size(); ++i) column_of_[schema_->fields[i].name] = i;
  }

  const std::shared_ptr<const Schema>& schema() const override { return schema_; }
  std::string Version() const override { return std::string(); }

  Status Read(const std::function<Status(const Batch&)>& each) override {
    if (conn_->broken()) {
      FERRY_ASSIGN_OR_RETURN(conn_, Connection::Open(conn_->endpoint()));
    }
    const std::string what = "reading table " + table_;
    // SCAN may return a key more than once: remember the keys' hashes (8 bytes a row).
    std::unordered_set<uint64_t> seen;
    Batch batch(schema_);
    std::string cursor = "0";
    std::vector<std::string> keys;
    std::vector<std::optional<std::string_view>> values(schema_->fields.size());
    do {
      FERRY_RETURN_IF_ERROR(ScanStep(conn_.get(), &cursor, pattern_, &keys, what));
      std::vector<std::string> fresh;
      for (auto& k : keys) {
        if (seen.insert(std::hash<std::string>()(k)).second) fresh.push_back(std::move(k));
      }
      if (fresh.empty()) continue;
      std::string buf;
      for (const auto& k : fresh) AppendCommand({"HGETALL", k}, &buf);
      FERRY_RETURN_IF_ERROR(conn_->Pipeline(
          {buf}, fresh.size(),
          [&](size_t i, Reply& r) -> Status {
            const std::string& key = fresh[i];
            if (r.IsError()) {
              return Status::Corruption("key " + Shown(key) + " of table " + table_ +
                                        " is not a hash (" + r.Describe() + "); every key under " +
                                        table_ + ":* must be a row ferry wrote");
            }
            if (r.type != Reply::Type::kArray || r.elements.size() % 2 != 0) {
              return Status::Corruption(Where(conn_->endpoint()) + " answered HGETALL with a " +
                                        r.Describe());
            }
            if (r.elements.empty()) return Status::OK();  // deleted since the SCAN
            for (auto& v : values) v.reset();
            for (size_t f = 0; f + 1 < r.elements.size(); f += 2) {
              auto it = column_of_.find(r.elements[f].str);
              if (it != column_of_.end()) values[it->second] = r.elements[f + 1].str;
            }
            for (size_t c = 0; c < values.size(); ++c) {
              if (!values[c]) {
                batch.column(c).AppendNull();
                continue;
              }
              Status s = redis::AppendFromValueText(*values[c], &batch.column(c));
              if (!s.ok()) {
                const Field& f = schema_->fields[c];
                return Status::Corruption(
                    "key " + Shown(key) + " field " + Shown(f.name) + " holds " +
                    Shown(*values[c]) + ", which is not a valid " + f.type.ToIceberg() +
                    " as ferry stores it" +
                    (s.message().empty() ? std::string() : ": " + s.message()));
              }
            }
            if (batch.num_rows() >= kReadBatchRows) {
              FERRY_RETURN_IF_ERROR(each(batch));
              batch.Clear();
            }
            return Status::OK();
          },
          what));
    } while (cursor != "0");
    if (batch.num_rows() > 0) FERRY_RETURN_IF_ERROR(each(batch));
    return Status::OK();
  }

 private:
  std::unique_ptr<Connection> conn_;
  std::string table_;
  std::string pattern_;
  std::shared_ptr<const Schema> schema_;
  std::unordered_map<std::string, size_t> column_of_;
};

// ---- the stream ----

class RedisStream final : public SinkStream {
 public:
  RedisStream(const Settings& s, std::unique_ptr<Connection> conn, std::string stream,
              std::shared_ptr<const Schema> schema, Json marker, std::string commit_record,
              std::string source_record)
      : s_(s),
        keys_(s.prefix, s.pipeline),
        conn_(std::move(conn)),
        stream_(std::move(stream)),
        table_(s.prefix + ":" + stream_),
        row_prefix_(keys_.RowPrefix(stream_)),
        checkpoint_key_(keys_.Checkpoint(stream_)),
        schema_key_(keys_.SchemaRecord(stream_)),
        schema_(std::move(schema)),
        marker_(std::move(marker)),
        commit_record_(std::move(commit_record)),
        source_record_(std::move(source_record)) {
    key_ = KeyPositions(*schema_);
  }

  const std::shared_ptr<const Schema>& schema() const override { return schema_; }
  Json Marker() const override { return marker_; }

  // Drops the load sets of this stream's other runs.
  Status StartLoad(const std::string& run) override {
    if (run.empty()) return Status::InvalidArgument("a load needs a run id");
    FERRY_RETURN_IF_ERROR(RequireKey("loaded"));
    FERRY_RETURN_IF_ERROR(Connected());
    const std::string runs_key = keys_.LoadRuns(stream_);
    const std::string what = "preparing the load of " + table_;
    FERRY_ASSIGN_OR_RETURN(Reply runs, conn_->Command({"SMEMBERS", runs_key}));
    std::string buf;
    std::vector<std::string> names;
    for (const Reply& r : runs.elements) {
      if (r.str == run) continue;
      // The set first: a crash in between leaves the run listed, and the next start drops it.
      AppendCommand({"DEL", keys_.LoadSet(stream_, r.str)}, &buf);
      AppendCommand({"SREM", runs_key, r.str}, &buf);
      names.insert(names.end(), {"DEL", "SREM"});
    }
    if (names.empty()) return Status::OK();
    return RunAll(conn_.get(), buf, names, what).status();
  }

  Status Write(const Batch& batch) override {
    FERRY_RETURN_IF_ERROR(RequireKey("loaded"));
    return AppendRows(batch, /*load=*/true);
  }
  Status WriteUpserts(const Batch& batch) override {
    FERRY_RETURN_IF_ERROR(RequireKey("upserted"));
    return AppendRows(batch, /*load=*/false);
  }
  Status WriteDeleteKeys(const Batch& batch) override {
    FERRY_RETURN_IF_ERROR(RequireKey("deleted by key"));
    FERRY_RETURN_IF_ERROR(CheckBatchColumns(batch, *schema_, table_));
    std::string key;
    for (size_t r = 0; r < batch.num_rows(); ++r) {
      FERRY_RETURN_IF_ERROR(RowKey(batch, r, &key));
      AppendCommand({"DEL", key}, &deletes_);
      ++delete_commands_;
    }
    return Status::OK();
  }
  uint64_t pending_rows() const override { return pending_rows_; }
  bool HasPending() const override { return write_commands_ + delete_commands_ > 0; }
  // A marker alone is one SET.
  bool CheapMarkerCommits() const override { return true; }

  Result<CommitResult> Commit(const std::string& load, const Json& marker,
                              const std::map<std::string, std::string>& summary,
                              const MarkerCheck& already_landed) override {
    (void)summary;  // Redis keeps no commit summaries
    FERRY_ASSIGN_OR_RETURN(std::string marker_text, DumpJson(marker, "the marker"));
    FaultPoint("sink.data_written");
    // The load set and the run list, then the checkpoint and the schema record.
    std::string tail;
    size_t tail_commands = 0;
    if (!load.empty()) {
      const std::string set = keys_.LoadSet(stream_, load);
      for (size_t i = 0; i < load_keys_.size(); i += kScanCount) {
        const size_t n = std::min(kScanCount, load_keys_.size() - i);
        AppendArrayHeader(2 + n, &tail);
        AppendBulk("SADD", &tail);
        AppendBulk(set, &tail);
        for (size_t k = i; k < i + n; ++k) AppendBulk(load_keys_[k], &tail);
        ++tail_commands;
      }
      AppendCommand({"SADD", keys_.LoadRuns(stream_), load}, &tail);
      ++tail_commands;
    }
    AppendCommand({"SET", checkpoint_key_, marker_text}, &tail);
    AppendCommand({"SET", schema_key_, commit_record_}, &tail);
    tail_commands += 2;
    const std::string what = "committing to " + table_;
    FERRY_ASSIGN_OR_RETURN(bool landed, Transact({deletes_, writes_, tail},
                                                 delete_commands_ + write_commands_ + tail_commands,
                                                 already_landed, "sink.before_commit", what));
    if (landed) {
      DiscardPending();
      return CommitResult{true};
    }
    totals_.rows += pending_rows_;
    DiscardPending();
    FaultPoint("sink.after_commit");
    return CommitResult{};
  }

  Result<CommitResult> Publish(const std::string& load, const Json& marker,
                               const MarkerCheck& already_landed) override {
    if (load.empty()) return Status::InvalidArgument("Publish needs the load's run id");
    FERRY_ASSIGN_OR_RETURN(std::string marker_text, DumpJson(marker, "the marker"));
    FERRY_RETURN_IF_ERROR(Connected());
    const std::string what = "publishing the load of " + table_;
    const std::string set = keys_.LoadSet(stream_, load);
    {
      FERRY_ASSIGN_OR_RETURN(Reply r, conn_->Command({"GET", checkpoint_key_}));
      FERRY_ASSIGN_OR_RETURN(Json current, ParseMarker(r, checkpoint_key_));
      if (already_landed && already_landed(current)) return CommitResult{true};
      if (current.is_null()) {
        // Every load commits its chunks (with the marker) before it is published.
        return Status::Corruption(
            "checkpoint key " + Shown(checkpoint_key_) +
            " is missing although the load's chunks were committed: Redis lost data (a restart "
            "without persistence, or eviction); the load is not published. Remove the stream's "
            "entry from the state file to load the table again");
      }
    }
    // Rows the load did not write: gone from the source.
    uint64_t deleted = 0;
    std::string cursor = "0";
    std::vector<std::string> keys;
    const std::string pattern = keys_.RowPattern(stream_);
    do {
      FERRY_RETURN_IF_ERROR(ScanStep(conn_.get(), &cursor, pattern, &keys, what));
      if (keys.empty()) continue;
      std::vector<std::string_view> args = {"SMISMEMBER", set};
      for (const auto& k : keys) args.push_back(k);
      FERRY_ASSIGN_OR_RETURN(Reply member, conn_->Command(args));
      if (member.type != Reply::Type::kArray || member.elements.size() != keys.size()) {
        return Status::Corruption(Where(s_.endpoint) + " answered SMISMEMBER with a " +
                                  member.Describe());
      }
      std::vector<std::string_view> del = {"DEL"};
      for (size_t i = 0; i < keys.size(); ++i) {
        if (member.elements[i].integer == 0) del.push_back(keys[i]);
      }
      if (del.size() > 1) {
        FERRY_RETURN_IF_ERROR(conn_->Command(del).status());
        deleted += del.size() - 1;
      }
    } while (cursor != "0");
    if (deleted > 0) {
      FERRY_LOG(kInfo) << table_ << ": " << deleted << " rows the load did not write deleted";
    }
    std::string tail;
    AppendCommand({"DEL", set}, &tail);
    AppendCommand({"SREM", keys_.LoadRuns(stream_), load}, &tail);
    AppendCommand({"SET", checkpoint_key_, marker_text}, &tail);
    AppendCommand({"SET", schema_key_, source_record_}, &tail);
    FERRY_ASSIGN_OR_RETURN(bool landed,
                           Transact({tail}, 4, already_landed, "sink.before_publish", what));
    if (landed) return CommitResult{true};
    commit_record_ = source_record_;
    FaultPoint("sink.after_publish");
    return CommitResult{};
  }

  void DiscardPending() override {
    deletes_.clear();
    writes_.clear();
    load_keys_.clear();
    delete_commands_ = write_commands_ = 0;
    pending_rows_ = 0;
  }

  Totals totals() const override {
    Totals t = totals_;
    t.bytes = bytes_sent_ + (conn_ ? conn_->bytes_sent() : 0);
    return t;
  }

 private:
  Status RequireKey(const char* what) const {
    if (!key_.empty()) return Status::OK();
    return Status::InvalidArgument(
        "table " + table_ + " has no primary key, so rows cannot be " + what +
        " (every row is a Redis hash named by its key); declare a key on the source table (NOT "
        "NULL columns) or set the stream's primary_key");
  }

  // The Redis key of row `row` (see the header).
  Status RowKey(const Batch& batch, size_t row, std::string* key) {
    *key = row_prefix_;
    for (size_t k = 0; k < key_.size(); ++k) {
      const Column& col = batch.column(key_[k]);
      if (!col.IsValid(row)) {
        return Status::InvalidArgument("key column " + schema_->fields[key_[k]].name +
                                       " of table " + table_ +
                                       " is NULL in a row; key columns must hold values (choose "
                                       "NOT NULL columns as the stream's primary_key)");
      }
      if (key_.size() == 1) return redis::AppendValueText(col, row, key);
      scratch_.clear();
      FERRY_RETURN_IF_ERROR(redis::AppendValueText(col, row, &scratch_));
      if (k > 0) *key += ':';
      *key += EscapeKeyPart(scratch_);
    }
    return Status::OK();
  }

  // DEL + HSET of every row (NULL columns left out); a load also remembers the keys.
  Status AppendRows(const Batch& batch, bool load) {
    FERRY_RETURN_IF_ERROR(CheckBatchColumns(batch, *schema_, table_));
    std::string key;
    for (size_t r = 0; r < batch.num_rows(); ++r) {
      FERRY_RETURN_IF_ERROR(RowKey(batch, r, &key));
      AppendCommand({"DEL", key}, &writes_);
      size_t fields = 0;
      for (size_t c = 0; c < batch.num_columns(); ++c) fields += batch.column(c).IsValid(r);
      AppendArrayHeader(2 + 2 * fields, &writes_);
      AppendBulk("HSET", &writes_);
      AppendBulk(key, &writes_);
      for (size_t c = 0; c < batch.num_columns(); ++c) {
        const Column& col = batch.column(c);
        if (!col.IsValid(r)) continue;
        AppendBulk(schema_->fields[c].name, &writes_);
        scratch_.clear();
        Status s = redis::AppendValueText(col, r, &scratch_);
        if (!s.ok()) return s.WithContext("column " + schema_->fields[c].name + " of " + table_);
        AppendBulk(scratch_, &writes_);
      }
      write_commands_ += 2;
      if (load) load_keys_.push_back(key);
    }
    pending_rows_ += batch.num_rows();
    return Status::OK();
  }

  // A connection that works: a new one after a failure closed the old.
  Status Connected() {
    if (conn_ && !conn_->broken()) return Status::OK();
    if (conn_) bytes_sent_ += conn_->bytes_sent();
    auto c = Connection::Open(s_.endpoint);
    if (!c.ok()) return c.status().WithContext("reconnecting for table " + table_);
    conn_ = std::move(*c);
    return Status::OK();
  }

  // WATCH + GET of the checkpoint key: the marker the destination holds now.
  Result<Json> WatchMarker(std::string_view what) {
    for (int attempt = 0;; ++attempt) {
      FERRY_RETURN_IF_ERROR(Connected());
      std::string buf;
      AppendCommand({"WATCH", checkpoint_key_}, &buf);
      AppendCommand({"GET", checkpoint_key_}, &buf);
      auto r = RunAll(conn_.get(), buf, {"WATCH", "GET"}, what);
      if (!r.ok()) {
        // Nothing is written yet: a connection lost since the last commit is made again once.
        if (r.status().code() == StatusCode::kUnavailable && attempt == 0) continue;
        return r.status();
      }
      return ParseMarker(r->replies[1], checkpoint_key_);
    }
  }

  // The commit protocol (see the header) for the commands in `parts` (`count` of them): returns
  // whether the marker showed the work already landed (nothing was written).
  Result<bool> Transact(const std::vector<std::string_view>& parts, size_t count,
                        const MarkerCheck& already_landed, const char* fault_point,
                        const std::string& what) {
    for (int attempt = 1;; ++attempt) {
      FERRY_ASSIGN_OR_RETURN(Json current, WatchMarker(what));
      if (already_landed && already_landed(current)) {
        (void)conn_->Command({"UNWATCH"});
        return true;
      }
      if (current.is_null() && !marker_.is_null()) {
        (void)conn_->Command({"UNWATCH"});
        return Status::Corruption(
            "checkpoint key " + Shown(checkpoint_key_) +
            " disappeared since the sync started: Redis lost data (a restart without "
            "persistence, eviction, or someone deleted it); nothing is written. Remove the "
            "stream's entry from the state file to load the table again");
      }
      // MULTI and the commands, queued (each answered QUEUED).
      std::string multi;
      AppendCommand({"MULTI"}, &multi);
      std::vector<std::string_view> all = {multi};
      all.insert(all.end(), parts.begin(), parts.end());
      Status queue_error;
      size_t failed_at = 0;
      FERRY_RETURN_IF_ERROR(conn_->Pipeline(
          all, count + 1,
          [&](size_t i, Reply& r) {
            if (r.IsError() && queue_error.ok()) {
              queue_error = redis::ErrorReplyStatus(i == 0 ? "MULTI" : "a queued command", r,
                                                    Where(s_.endpoint));
              failed_at = i;
            }
            return Status::OK();
          },
          what));
      if (!queue_error.ok()) {
        (void)conn_->Command({"DISCARD"});
        return queue_error.WithContext(what + " (command " + std::to_string(failed_at) +
                                       " of the transaction; nothing was applied)");
      }
      FaultPoint(fault_point);
      std::string exec;
      AppendCommand({"EXEC"}, &exec);
      Reply result;
      Status sent;
      if (FaultInjected("sink.commit_outcome_lost")) {
        sent = conn_->SendAndCut(exec, what);  // EXEC runs; its answer is lost
      } else {
        sent = conn_->Pipeline(
            {exec}, 1,
            [&](size_t, Reply& r) {
              result = std::move(r);
              return Status::OK();
            },
            what);
      }
      if (!sent.ok()) {
        if (sent.code() != StatusCode::kUnavailable) return sent;
        FERRY_RETURN_IF_ERROR(Settle(already_landed, sent));
        return false;
      }
      if (result.IsNil()) {
        if (attempt < kExecAttempts) continue;
        return Status::CommitFailed(
            "checkpoint key " + Shown(checkpoint_key_) + " was changed by another writer " +
            std::to_string(kExecAttempts) +
            " times while committing; is a second sync of pipeline '" + s_.pipeline + "' running?");
      }
      if (result.IsError()) {
        return redis::ErrorReplyStatus("EXEC", result, Where(s_.endpoint)).WithContext(what);
      }
      if (result.type != Reply::Type::kArray || result.elements.size() != count) {
        return Status::Corruption(Where(s_.endpoint) + " answered EXEC with a " +
                                  result.Describe() + " for " + std::to_string(count) +
                                  " commands while " + what);
      }
      for (size_t i = 0; i < result.elements.size(); ++i) {
        if (result.elements[i].IsError()) {
          return Status::IOError(
              Where(s_.endpoint) + " ran the transaction (" + what + ") but command " +
              std::to_string(i + 1) + " of it failed (" + result.elements[i].Describe() +
              "), and Redis does not roll back the others; the table may differ from the "
              "source: run a full refresh of the stream");
        }
      }
      return false;
    }
  }

  // EXEC's outcome is unknown (`cause`): a new connection reads the checkpoint back. OK when it
  // shows the commit landed.
  Status Settle(const MarkerCheck& already_landed, const Status& cause) {
    FERRY_LOG(kWarn) << table_ << ": the connection was lost during EXEC; reading the checkpoint "
                     << "key back to learn whether the commit landed";
    Status c = Connected();
    if (!c.ok()) return cause;
    auto r = conn_->Command({"GET", checkpoint_key_});
    if (!r.ok()) return cause;
    FERRY_ASSIGN_OR_RETURN(Json current, ParseMarker(*r, checkpoint_key_));
    if (already_landed && already_landed(current)) return Status::OK();
    return Status::Unavailable(cause.message() + "; the checkpoint key shows the commit did not " +
                               "land; it is retried");
  }

  const Settings s_;
  Keys keys_;
  std::unique_ptr<Connection> conn_;
  const std::string stream_;
  const std::string table_;       // "<prefix>:<stream>", for messages
  const std::string row_prefix_;  // "<prefix>:<stream part>:"
  const std::string checkpoint_key_;
  const std::string schema_key_;
  std::shared_ptr<const Schema> schema_;
  Json marker_;
  std::string commit_record_;           // the schema record written with commits
  std::string source_record_;           // ... and with Publish
  std::vector<size_t> key_;             // key columns' positions in schema_
  std::string deletes_;                 // DEL commands
  std::string writes_;                  // DEL + HSET per row
  std::vector<std::string> load_keys_;  // rows written for a load since the last commit
  size_t delete_commands_ = 0;
  size_t write_commands_ = 0;
  uint64_t pending_rows_ = 0;
  uint64_t bytes_sent_ = 0;  // by connections closed since
  std::string scratch_;
  Totals totals_;
};

// ---- the sink ----

Status CheckNames(const std::string& stream, const Schema& schema, const std::string& table) {
  if (stream.empty()) return Status::InvalidArgument("a stream name is empty");
  if (ReservedStream(stream)) {
    return Status::InvalidArgument("stream " + stream +
                                   " cannot be written to Redis: ferry_state, ferry_schema, "
                                   "ferry_load and ferry_loads name ferry's own keys");
  }
  if (schema.fields.empty()) return Status::InvalidArgument("stream " + stream + " has no columns");
  std::set<std::string> seen;
  for (const Field& f : schema.fields) {
    if (!seen.insert(f.name).second) {
      return Status::InvalidArgument("stream " + stream + " has two columns named " + f.name +
                                     "; a hash holds one field per name");
    }
  }
  if (schema.identifier_field_ids.empty()) {
    return Status::InvalidArgument(
        "table " + table +
        " has no primary key, and every row in Redis is a hash named by its key; declare a key "
        "on the source table (NOT NULL columns) or set the stream's primary_key");
  }
  for (int32_t id : schema.identifier_field_ids) {
    if (schema.FindById(id) == nullptr) {
      return Status::Internal("stream " + stream + " names a key column id " + std::to_string(id) +
                              " it does not have");
    }
  }
  return Status::OK();
}

class RedisSink final : public Sink {
 public:
  RedisSink(Settings s, std::unique_ptr<Connection> conn)
      : s_(std::move(s)), keys_(s_.prefix, s_.pipeline), conn_(std::move(conn)) {}

  std::string Describe() const override {
    return "Redis at " + s_.endpoint.HostPort() + " db " + std::to_string(s_.endpoint.db) +
           ", prefix " + s_.prefix;
  }
  std::string Guarantee() const override {
    return "exactly-once (rows and checkpoint key in one MULTI/EXEC transaction)";
  }
  std::string TableName(const std::string& stream) const override {
    return s_.prefix + ":" + stream;
  }

  Result<std::unique_ptr<SinkStream>> OpenStream(const std::string& stream,
                                                 const Schema& source_schema,
                                                 bool replacing) override {
    const std::string table = TableName(stream);
    FERRY_RETURN_IF_ERROR(CheckNames(stream, source_schema, table));
    FERRY_ASSIGN_OR_RETURN(auto conn, Connection::Open(s_.endpoint));
    const std::string schema_key = keys_.SchemaRecord(stream);
    const std::string checkpoint_key = keys_.Checkpoint(stream);
    std::string buf;
    AppendCommand({"GET", schema_key}, &buf);
    AppendCommand({"GET", checkpoint_key}, &buf);
    FERRY_ASSIGN_OR_RETURN(Collected got,
                           RunAll(conn.get(), buf, {"GET", "GET"}, "opening table " + table));
    FERRY_ASSIGN_OR_RETURN(std::string source_record, RecordText(s_.pipeline, source_schema));
    std::string commit_record = source_record;
    const Reply& rec = got.replies[0];
    if (rec.type == Reply::Type::kBulk) {
      FERRY_ASSIGN_OR_RETURN(TableRecord old, ParseRecord(rec.str, schema_key));
      if (old.pipeline != s_.pipeline) {
        return Status::InvalidArgument(
            "table " + table + " in " + Describe() + " belongs to pipeline '" + old.pipeline +
            "', not '" + s_.pipeline + "' (schema key " + Shown(schema_key) +
            "), so ferry leaves it alone; give this pipeline another prefix, or delete that "
            "pipeline's keys of the table");
      }
      auto evolved = Evolve(old.schema, source_schema, table);
      if (evolved.ok()) {
        FERRY_ASSIGN_OR_RETURN(commit_record, RecordText(s_.pipeline, *evolved));
      } else if (!replacing) {
        return evolved.status();
      }
      // A replacing stream whose columns cannot evolve records the source's columns at once:
      // its load rewrites every row.
    } else if (!rec.IsNil()) {
      return Status::Corruption("schema key " + Shown(schema_key) + " holds a " + rec.Describe() +
                                ", not ferry's schema record");
    }
    FERRY_ASSIGN_OR_RETURN(Json marker, ParseMarker(got.replies[1], checkpoint_key));
    return std::unique_ptr<SinkStream>(
        new RedisStream(s_, std::move(conn), stream, std::make_shared<const Schema>(source_schema),
                        std::move(marker), std::move(commit_record), std::move(source_record)));
  }

  Result<Json> ReadMarker(const std::string& stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (conn_->broken()) {
      FERRY_ASSIGN_OR_RETURN(conn_, Connection::Open(s_.endpoint));
    }
    const std::string key = keys_.Checkpoint(stream);
    FERRY_ASSIGN_OR_RETURN(Reply r, conn_->Command({"GET", key}));
    return ParseMarker(r, key);
  }

  Result<std::unique_ptr<TableReader>> OpenReader(const std::string& stream) override {
    FERRY_ASSIGN_OR_RETURN(auto conn, Connection::Open(s_.endpoint));
    const std::string schema_key = keys_.SchemaRecord(stream);
    FERRY_ASSIGN_OR_RETURN(Reply rec, conn->Command({"GET", schema_key}));
    if (rec.IsNil()) return std::unique_ptr<TableReader>();
    if (rec.type != Reply::Type::kBulk) {
      return Status::Corruption("schema key " + Shown(schema_key) + " holds a " + rec.Describe() +
                                ", not ferry's schema record");
    }
    FERRY_ASSIGN_OR_RETURN(TableRecord r, ParseRecord(rec.str, schema_key));
    return std::unique_ptr<TableReader>(
        new RedisReader(std::move(conn), TableName(stream), keys_.RowPattern(stream),
                        std::make_shared<const Schema>(std::move(r.schema))));
  }

  // What the server is: refuses a cluster, a replica and versions before 6.2; warns about
  // eviction policies that may drop ferry's keys.
  Status CheckServer() {
    auto info = conn_->Command({"INFO"});
    if (!info.ok()) {
      if (info.status().code() == StatusCode::kPermissionDenied) return Status::OK();  // ACL
      return info.status().WithContext("asking the server what it is (INFO)");
    }
    std::map<std::string, std::string> fields;
    std::string_view text = info->str;
    while (!text.empty()) {
      size_t end = text.find('\n');
      std::string_view line = text.substr(0, end);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      size_t colon = line.find(':');
      if (colon != std::string_view::npos && line[0] != '#') {
        fields[std::string(line.substr(0, colon))] = std::string(line.substr(colon + 1));
      }
      if (end == std::string_view::npos) break;
      text.remove_prefix(end + 1);
    }
    const std::string where = Where(s_.endpoint);
    if (fields["cluster_enabled"] == "1") {
      return Status::NotSupported(where +
                                  " runs in cluster mode; ferry writes to a single Redis server "
                                  "(or a primary with replicas), not a Redis Cluster");
    }
    if (fields["role"] == "slave" || fields["role"] == "replica") {
      return Status::InvalidArgument(where + " is a replica; point destination.url at the primary");
    }
    const std::string& version = fields["redis_version"];
    int major = 0, minor = 0;
    if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) == 2 &&
        (major < 6 || (major == 6 && minor < 2))) {
      return Status::NotSupported(where + " is Redis " + version +
                                  "; ferry needs Redis 6.2 or newer (SMISMEMBER)");
    }
    const std::string& policy = fields["maxmemory_policy"];
    if (policy.rfind("allkeys", 0) == 0) {
      FERRY_LOG(kWarn) << where << " evicts keys (maxmemory-policy " << policy
                       << ") when it runs out of memory: rows and checkpoint keys may vanish; "
                       << "set maxmemory-policy noeviction";
    }
    return Status::OK();
  }

 private:
  Settings s_;
  Keys keys_;
  std::mutex mu_;
  std::unique_ptr<Connection> conn_;  // guarded by mu_: ReadMarker
};

}  // namespace

Result<std::unique_ptr<Sink>> OpenRedisSink(config::DestinationConfig& cfg,
                                            const std::string& pipeline) {
  config::Options& o = cfg.options;
  FERRY_ASSIGN_OR_RETURN(std::string url, o.TakeString("url"));
  Settings s;
  s.pipeline = pipeline;
  s.prefix = o.TakeOptionalString("prefix").value_or("ferry");
  FERRY_RETURN_IF_ERROR(o.CheckAllUsed({"url", "prefix"}));
  if (pipeline.empty()) return Status::InvalidArgument("the pipeline has no name");
  if (s.prefix.empty()) {
    return Status::InvalidArgument("destination.prefix is empty; give the keys a prefix (ferry)");
  }
  FERRY_ASSIGN_OR_RETURN(s.endpoint, redis::ParseRedisUrl(url));
  auto conn = Connection::Open(s.endpoint);
  if (!conn.ok()) return conn.status().WithContext("connecting to the destination");
  auto sink = std::make_unique<RedisSink>(std::move(s), std::move(*conn));
  FERRY_RETURN_IF_ERROR(sink->CheckServer());
  return std::unique_ptr<Sink>(std::move(sink));
}

}  // namespace ferry::sink
