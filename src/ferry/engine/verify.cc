#include "ferry/engine/verify.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ferry/base/log.h"
#include "ferry/engine/progress.h"
#include "ferry/engine/streams.h"
#include "ferry/engine/window.h"
#include "ferry/sink/sink.h"
#include "ferry/source/source.h"
#include "ferry/types/value_parse.h"

namespace ferry::engine {
namespace {

std::string Quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "''";
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string Hex(std::string_view s) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::string Shorten(std::string s) {
  constexpr size_t kMax = 80;
  if (s.size() <= kMax) return s;
  s.resize(kMax);
  return s + "...";
}

}  // namespace

std::string DisplayValue(const Column& col, size_t row) {
  if (!col.IsValid(row)) return "NULL";
  char buf[64];
  switch (col.type().kind()) {
    case TypeKind::kList: {
      auto [first, end] = col.ListRange(row);
      std::string out = "[";
      for (size_t i = first; i < end; ++i) {
        out += (i > first ? ", " : "") + DisplayValue(col.list_child(), i);
      }
      return out + "]";
    }
    case TypeKind::kBoolean:
      return col.ValueAt<uint8_t>(row) != 0 ? "true" : "false";
    case TypeKind::kInt32:
      return std::to_string(col.ValueAt<int32_t>(row));
    case TypeKind::kInt64:
      return std::to_string(col.ValueAt<int64_t>(row));
    case TypeKind::kFloat32:
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(col.ValueAt<float>(row)));
      return buf;
    case TypeKind::kFloat64:
      std::snprintf(buf, sizeof buf, "%.17g", col.ValueAt<double>(row));
      return buf;
    case TypeKind::kDecimal:
      return FormatDecimal(col.ValueAt<int128_t>(row), col.type().scale());
    case TypeKind::kDate:
      return FormatDate(col.ValueAt<int32_t>(row));
    case TypeKind::kTime: {
      const int64_t us = col.ValueAt<int64_t>(row);
      std::snprintf(
          buf, sizeof buf, "%02lld:%02lld:%02lld.%06lld", static_cast<long long>(us / 3600000000LL),
          static_cast<long long>(us / 60000000LL % 60), static_cast<long long>(us / 1000000LL % 60),
          static_cast<long long>(us % 1000000LL));
      return buf;
    }
    case TypeKind::kTimestamp:
      return FormatTimestamp(col.ValueAt<int64_t>(row));
    case TypeKind::kTimestampTz:
      return FormatTimestamp(col.ValueAt<int64_t>(row)) + "+00";
    case TypeKind::kString:
      return Shorten(Quote(col.GetBytes(row)));
    case TypeKind::kBinary:
      return Shorten("x'" + Hex(col.GetBytes(row)) + "'");
    case TypeKind::kUuid: {
      const std::string h =
          Hex(std::string_view(reinterpret_cast<const char*>(col.fixed_data()) + row * 16, 16));
      return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
             "-" + h.substr(20);
    }
    default:
      break;
  }
  return "(" + col.type().ToIceberg() + ")";
}

FingerprintDiff CompareFingerprints(std::vector<Fingerprint>* source,
                                    std::vector<Fingerprint>* destination, size_t max_keys) {
  auto by_key_then_row = [](const Fingerprint& a, const Fingerprint& b) {
    return a.key != b.key ? a.key < b.key : a.row < b.row;
  };
  std::sort(source->begin(), source->end(), by_key_then_row);
  std::sort(destination->begin(), destination->end(), by_key_then_row);
  FingerprintDiff d;
  const std::vector<Fingerprint>& s = *source;
  const std::vector<Fingerprint>& t = *destination;
  size_t i = 0, j = 0;
  while (i < s.size() || j < t.size()) {
    // The next key: the smaller of the two sides' current keys.
    uint64_t key;
    if (i == s.size()) {
      key = t[j].key;
    } else if (j == t.size()) {
      key = s[i].key;
    } else {
      key = std::min(s[i].key, t[j].key);
    }
    // Merge the key's rows (both sorted by row hash): equal hashes match.
    uint64_t only_source = 0, only_destination = 0;
    while ((i < s.size() && s[i].key == key) || (j < t.size() && t[j].key == key)) {
      const bool has_s = i < s.size() && s[i].key == key;
      const bool has_t = j < t.size() && t[j].key == key;
      if (has_s && has_t && s[i].row == t[j].row) {
        ++i;
        ++j;
      } else if (has_s && (!has_t || s[i].row < t[j].row)) {
        ++only_source;
        ++i;
      } else {
        ++only_destination;
        ++j;
      }
    }
    const uint64_t changed = std::min(only_source, only_destination);
    const uint64_t missing = only_source - changed;
    const uint64_t extra = only_destination - changed;
    d.different += changed;
    d.missing += missing;
    d.extra += extra;
    auto note = [&](uint64_t n, DiffKind kind) {
      if (n > 0 && d.first.size() < max_keys) d.first.emplace_back(key, kind);
    };
    note(changed, DiffKind::kDifferent);
    note(missing, DiffKind::kMissing);
    note(extra, DiffKind::kExtra);
  }
  return d;
}

// ---- the command ----

namespace {

// One source's stream of a table; a table fed by several sources has one per source.
struct VerifiedPart {
  source::Source* src = nullptr;
  source::StreamInfo info;
  config::StreamConfig settings;
  const config::SourceConfig* cfg = nullptr;
  std::shared_ptr<transform::Transform> transform;  // nullptr: rows are written as read
  std::string destination;                          // the destination's name of its table
  std::string marker_part;                          // its part of the table's marker (MarkerPart)
  std::string Label() const { return SourceLabel(*cfg, info.name); }
  // What its loads and windows read, and on what.
  const source::StreamInfo& read_info() const { return transform ? transform->read_info() : info; }
  std::shared_ptr<const Schema> read_schema(const std::shared_ptr<const Schema>& written) const {
    return transform ? transform->read_schema() : written;
  }
  // `each` over the source's batches as the destination gets them (on `written`: the part's
  // transforms applied, rows its filter rejects left out); a transform's error stops the read
  // and is kept in `*error`.
  std::function<bool(Batch&)> AsWritten(const std::shared_ptr<const Schema>& written, Status* error,
                                        const std::function<bool(Batch&)>& each) const {
    return [this, written, error, &each](Batch& b) {
      if (!transform) return each(b);
      Batch out(written), removed(written);
      Status s = transform->Apply(b, /*keyed=*/false, /*deletes=*/false, written, &out, &removed);
      if (!s.ok()) {
        *error = s;
        return false;
      }
      return each(out);
    };
  }
};

// A row captured in the second pass, to name its key and its values.
struct CapturedRow {
  std::string key;                 // as displayed
  std::vector<std::string> canon;  // per compared column
  std::vector<std::string> shown;  // per compared column
};

// One side of a table: how its batches map onto the compared columns.
struct Side {
  std::vector<size_t> columns;  // batch positions of the compared columns
  std::vector<size_t> key;      // batch positions of the key columns
  // Batch position of _ferry_deleted (soft deletes): rows where it is true are kept in the
  // destination for the source's deletes, and are not compared.
  std::optional<size_t> deleted;
  bool Kept(const Batch& b, size_t r) const {
    return deleted && b.column(*deleted).IsValid(r) && b.column(*deleted).ValueAt<uint8_t>(r) != 0;
  }
};

class Capture {
 public:
  Capture(const Side& side, const std::vector<std::string>& names,
          const std::vector<size_t>& key_in_compared, const std::unordered_set<uint64_t>& wanted)
      : side_(side),
        names_(names),
        key_in_compared_(key_in_compared),
        wanted_(wanted),
        fp_(side.columns, side.key) {}

  void Add(const Batch& b) {
    for (size_t r = 0; r < b.num_rows(); ++r) {
      if (side_.Kept(b, r)) continue;
      const Fingerprint f = fp_.Of(b, r);
      if (!wanted_.count(f.key)) continue;
      std::vector<CapturedRow>& rows = rows_[f.key];
      if (rows.size() >= 4) continue;  // rows of one key hash: enough to name them
      CapturedRow c;
      for (size_t k = 0; k < side_.columns.size(); ++k) {
        const Column& col = b.column(side_.columns[k]);
        std::string canon;
        AppendCanonicalValue(col, r, &canon);
        c.canon.push_back(std::move(canon));
        c.shown.push_back(DisplayValue(col, r));
      }
      // The key: its columns, or every column of a keyless row.
      std::vector<size_t> parts = key_in_compared_;
      if (parts.empty()) {
        for (size_t k = 0; k < side_.columns.size(); ++k) parts.push_back(k);
      }
      for (size_t k : parts) {
        c.key += (c.key.empty() ? "" : ", ") + names_[k] + "=" + c.shown[k];
      }
      if (parts.size() > 1) c.key = "(" + c.key + ")";
      rows.push_back(std::move(c));
    }
  }
  const std::vector<CapturedRow>* Find(uint64_t key) const {
    auto it = rows_.find(key);
    return it == rows_.end() ? nullptr : &it->second;
  }

 private:
  const Side& side_;
  const std::vector<std::string>& names_;
  const std::vector<size_t>& key_in_compared_;
  const std::unordered_set<uint64_t>& wanted_;
  RowFingerprinter fp_;
  std::unordered_map<uint64_t, std::vector<CapturedRow>> rows_;
};

class Verifier {
 public:
  Verifier(const VerifyOptions& options, sink::Sink* dst) : options_(options), dst_(dst) {}

  // Compares a table with its source table, or with the union of its sources' tables.
  Status Verify(const std::vector<VerifiedPart>& parts, TableVerify* t) {
    const source::StreamInfo& info = parts.front().info;
    const config::StreamConfig& sc = parts.front().settings;
    for (const auto& p : parts) t->stream += (t->stream.empty() ? "" : ", ") + p.Label();
    const transform::Transform* tf = parts.front().transform.get();
    t->table = dst_->TableName(parts.front().destination);
    t->mode = std::string(config::SyncModeName(sc.mode));
    if (const std::string problem = parts.front().read_info().Problem(); !problem.empty()) {
      return Status::NotSupported(problem);
    }
    std::vector<std::string> key = sc.primary_key.empty() ? info.primary_key : sc.primary_key;
    // The source's rows as the destination gets them: its columns renamed, computed ones added.
    auto source_schema = std::make_shared<const Schema>(DestinationSchema(tf, info));
    if (tf != nullptr) {
      for (auto& k : key) {
        for (size_t i = 0; i < tf->read_schema()->fields.size(); ++i) {
          if (tf->read_schema()->fields[i].name == k) {
            k = source_schema->fields[i].name;
            break;
          }
        }
      }
    }

    // The destination: main's head as a reader sees it.
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<sink::TableReader> scan,
                           dst_->OpenReader(parts.front().destination));
    if (!scan) {
      t->table_missing = true;
    } else {
      t->version = scan->Version();
    }

    // The columns both sides have, in the source's order.
    Side src_side, dst_side;
    std::vector<std::string> names;
    std::vector<bool> dest_matched(scan ? scan->schema()->fields.size() : 0, false);
    for (size_t i = 0; i < source_schema->fields.size(); ++i) {
      const Field& f = source_schema->fields[i];
      if (!scan) {
        src_side.columns.push_back(i);
        names.push_back(f.name);
        continue;
      }
      const auto& dfields = scan->schema()->fields;
      auto it = std::find_if(dfields.begin(), dfields.end(),
                             [&](const Field& d) { return d.name == f.name; });
      if (it == dfields.end()) {
        t->source_only_columns.push_back(f.name);
        continue;
      }
      const auto j = static_cast<size_t>(it - dfields.begin());
      dest_matched[j] = true;
      if (tf != nullptr && f.name == "_ferry_synced_at") {
        t->notes.push_back(
            "column _ferry_synced_at is not compared: it says when each row was "
            "read, and verify reads them now");
        continue;
      }
      if (tf != nullptr &&
          (f.name == "_ferry_op" || f.name == "_ferry_source_ts" || f.name == "_ferry_position")) {
        t->notes.push_back("column " + f.name +
                           " is not compared: it describes the change that wrote each row, and "
                           "verify reads the rows as they are now");
        continue;
      }
      if (tf != nullptr && tf->soft_deletes() && f.name == config::kDeletedColumn) {
        dst_side.deleted = j;
        continue;
      }
      if (KindOf(f.type) == ValueKind::kOther || KindOf(it->type) == ValueKind::kOther) {
        t->notes.push_back("column " + f.name + " (" + it->type.ToIceberg() +
                           ") is not compared: verify cannot compare values of its type yet");
        continue;
      }
      if (!SameKind(f.type, it->type)) {
        t->type_differences.push_back(f.name + ": source " + f.type.ToIceberg() + ", destination " +
                                      it->type.ToIceberg());
      }
      src_side.columns.push_back(i);
      dst_side.columns.push_back(j);
      names.push_back(f.name);
    }
    for (size_t j = 0; j < dest_matched.size(); ++j) {
      if (!dest_matched[j]) t->destination_only_columns.push_back(scan->schema()->fields[j].name);
    }
    // The key, by position among the compared columns.
    std::vector<size_t> key_in_compared;
    for (const auto& k : key) {
      auto it = std::find(names.begin(), names.end(), k);
      if (it == names.end()) {
        t->notes.push_back("key column " + k +
                           " is not on both sides: rows are compared as a multiset");
        key_in_compared.clear();
        break;
      }
      key_in_compared.push_back(static_cast<size_t>(it - names.begin()));
    }
    for (size_t k : key_in_compared) {
      t->key.push_back(names[k]);
      src_side.key.push_back(src_side.columns[k]);
      if (scan) dst_side.key.push_back(dst_side.columns[k]);
    }

    // First pass: fingerprints of both sides.
    std::vector<Fingerprint> src_fp, dst_fp;
    {
      RowFingerprinter fp(src_side.columns, src_side.key);
      FERRY_RETURN_IF_ERROR(ReadSource(parts, source_schema, [&](const Batch& b) {
        for (size_t r = 0; r < b.num_rows(); ++r) src_fp.push_back(fp.Of(b, r));
      }));
    }
    uint64_t kept_deleted = 0;
    if (scan) {
      RowFingerprinter fp(dst_side.columns, dst_side.key);
      FERRY_RETURN_IF_ERROR(scan->Read([&](const Batch& b) {
        for (size_t r = 0; r < b.num_rows(); ++r) {
          if (dst_side.Kept(b, r)) {
            ++kept_deleted;
          } else {
            dst_fp.push_back(fp.Of(b, r));
          }
        }
        return Status::OK();
      }));
    }
    if (dst_side.deleted) {
      t->notes.push_back(std::to_string(kept_deleted) + " row(s) with " + config::kDeletedColumn +
                         " true (deletes: soft) are not compared: the source deleted them");
    }
    t->source_rows = src_fp.size();
    t->destination_rows = dst_fp.size();
    FingerprintDiff diff = CompareFingerprints(&src_fp, &dst_fp, options_.max_examples);
    t->missing = diff.missing;
    t->extra = diff.extra;
    t->different = diff.different;
    // Incremental: which differences the next window reads, and which no window can.
    std::vector<uint64_t> pending;
    if (sc.mode == config::SyncMode::kIncremental && sc.cursor && !diff.empty() &&
        !src_side.key.empty()) {
      FERRY_RETURN_IF_ERROR(PendingKeys(parts, source_schema, src_side, &pending));
      auto unread = [&](std::vector<Fingerprint>* fps) {
        std::erase_if(*fps, [&](const Fingerprint& f) {
          return std::binary_search(pending.begin(), pending.end(), f.key);
        });
      };
      unread(&src_fp);
      unread(&dst_fp);
      const FingerprintDiff rest = CompareFingerprints(&src_fp, &dst_fp, 0);
      t->pending = (diff.missing + diff.different) - (rest.missing + rest.different);
      t->pending_known = true;
    }
    src_fp = {};
    dst_fp = {};

    // Second pass: name the first differing keys and the columns that differ.
    if (!diff.first.empty()) {
      std::unordered_set<uint64_t> wanted;
      for (const auto& [k, kind] : diff.first) wanted.insert(k);
      Capture src_rows(src_side, names, key_in_compared, wanted);
      Capture dst_rows(dst_side, names, key_in_compared, wanted);
      FERRY_RETURN_IF_ERROR(
          ReadSource(parts, source_schema, [&](const Batch& b) { src_rows.Add(b); }));
      if (scan) {
        FERRY_RETURN_IF_ERROR(scan->Read([&](const Batch& b) {
          dst_rows.Add(b);
          return Status::OK();
        }));
      }
      for (const auto& [k, kind] : diff.first) {
        t->examples.push_back(Example(k, kind, names, src_rows, dst_rows));
        if (sc.mode == config::SyncMode::kIncremental && kind != DiffKind::kExtra) {
          t->examples.back().why = std::binary_search(pending.begin(), pending.end(), k)
                                       ? "the next sync reads it"
                                       : "no incremental sync reads it";
        }
      }
      std::stable_sort(t->examples.begin(), t->examples.end(),
                       [](const VerifyExample& a, const VerifyExample& b) {
                         return a.kind != b.kind ? a.kind < b.kind : a.key < b.key;
                       });
    }
    if (!t->matches()) AddNotes(parts, t);
    return Status::OK();
  }

 private:
  // Every row of every part's source table, in its source's snapshot.
  Status ReadSource(const std::vector<VerifiedPart>& parts,
                    const std::shared_ptr<const Schema>& schema,
                    const std::function<void(const Batch&)>& each) {
    for (const VerifiedPart& p : parts) {
      FERRY_ASSIGN_OR_RETURN(
          source::ChunkPlan plan,
          p.src->PlanChunks(p.info, std::max<int64_t>(p.settings.chunk_rows, 1)));
      Status error;
      const std::function<bool(Batch&)> all = [&](Batch& b) {
        each(b);
        return true;
      };
      for (int64_t i = 0; i < plan.count; ++i) {
        Status s = p.src->ReadChunk(p.read_info(), plan.At(i), p.read_schema(schema),
                                    options_.batch_rows, p.AsWritten(schema, &error, all));
        FERRY_RETURN_IF_ERROR(error);
        FERRY_RETURN_IF_ERROR(s);
      }
    }
    return Status::OK();
  }

  // The keys of the rows the next incremental window of each part would read (the window from
  // the table's marker: engine/window.h), sorted.
  Status PendingKeys(const std::vector<VerifiedPart>& parts,
                     const std::shared_ptr<const Schema>& schema, const Side& side,
                     std::vector<uint64_t>* keys) {
    RowFingerprinter fp(side.columns, side.key);
    for (const VerifiedPart& p : parts) {
      const std::string& cursor = *p.settings.cursor;
      WindowBounds bounds;
      FERRY_ASSIGN_OR_RETURN(Json table_marker, dst_->ReadMarker(p.destination));
      const Json marker = PartOfMarker(table_marker, p.marker_part);
      if (marker.is_object() && marker.value("mode", "") == "incremental") {
        FERRY_ASSIGN_OR_RETURN(IncrementalProgress mk,
                               IncrementalProgress::FromJson(marker, "the table's marker"));
        if (mk.cursor_column == cursor) {
          bounds.from = mk.cursor;
          bounds.ties = mk.ties;
        }
      }
      FERRY_ASSIGN_OR_RETURN(bounds.upper, p.src->MaxCursor(p.info, cursor, bounds.from));
      if (bounds.empty()) continue;
      Status error;
      const std::function<bool(Batch&)> each = [&](Batch& b) {
        for (size_t r = 0; r < b.num_rows(); ++r) keys->push_back(fp.Of(b, r).key);
        return true;
      };
      auto read = ReadWindow(p.src, p.read_info(), cursor, bounds, p.read_schema(schema),
                             options_.batch_rows, static_cast<size_t>(p.settings.tie_rows),
                             p.AsWritten(schema, &error, each));
      FERRY_RETURN_IF_ERROR(error);
      FERRY_RETURN_IF_ERROR(read.status());
    }
    std::sort(keys->begin(), keys->end());
    return Status::OK();
  }

  static VerifyExample Example(uint64_t key, DiffKind kind, const std::vector<std::string>& names,
                               const Capture& src_rows, const Capture& dst_rows) {
    VerifyExample e;
    e.kind = kind;
    const std::vector<CapturedRow>* s = src_rows.Find(key);
    const std::vector<CapturedRow>* d = dst_rows.Find(key);
    const std::vector<CapturedRow>* named = kind == DiffKind::kExtra ? d : s;
    if (named == nullptr || named->empty()) named = kind == DiffKind::kExtra ? s : d;
    e.key = named != nullptr && !named->empty() ? named->front().key : "(key not found again)";
    if (kind != DiffKind::kDifferent || s == nullptr || d == nullptr) return e;
    // The source and destination rows of the same key (a hash shared by two keys: match by key).
    const CapturedRow* a = &s->front();
    const CapturedRow* b = &d->front();
    for (const auto& x : *s) {
      for (const auto& y : *d) {
        if (x.key == y.key && x.canon != y.canon) {
          a = &x;
          b = &y;
        }
      }
    }
    e.key = a->key;
    for (size_t c = 0; c < names.size(); ++c) {
      if (a->canon[c] != b->canon[c]) {
        e.columns.push_back(names[c] + ": source " + a->shown[c] + ", destination " + b->shown[c]);
      }
    }
    return e;
  }

  // What the differences may mean for the stream's mode.
  void AddNotes(const std::vector<VerifiedPart>& parts, TableVerify* t) {
    const config::StreamConfig& sc = parts.front().settings;
    if (t->table_missing) {
      t->notes.push_back("the destination has no table " + t->table + ": run ferry sync");
      return;
    }
    switch (sc.mode) {
      case config::SyncMode::kFullRefresh:
        t->notes.push_back(
            "full refresh: the table holds the source as of its last sync; changes made since "
            "then show here until the next sync");
        break;
      case config::SyncMode::kIncremental: {
        const uint64_t changed = t->missing + t->different;
        if (!t->pending_known && changed > 0) {
          t->notes.push_back(
              "incremental: rows changed since the last sync show here until the next sync");
        }
        if (t->pending > 0) {
          t->notes.push_back("incremental: " + std::to_string(t->pending) + " of the " +
                             std::to_string(changed) +
                             " missing or different rows are read by the next sync (their "
                             "cursor is above the last value the table holds, or at it and the "
                             "row not yet committed): run ferry sync --once and verify again");
        }
        if (t->pending_known && changed > t->pending) {
          t->notes.push_back(
              "incremental: " + std::to_string(changed - t->pending) +
              " missing or different row(s) will never be read by an incremental sync: their "
              "cursor is NULL, or was not moved forward when the row changed (or moved "
              "backwards); this is a divergence, not lag. A full_refresh of the stream loads them; "
              "to keep incremental mode, make every change move the cursor forward");
        }
        if (t->extra > 0) {
          t->notes.push_back("incremental: " + std::to_string(t->extra) +
                             " row(s) of the table are not in the source: deleted there, or their "
                             "key changed (incremental reads never see deletes; use cdc to "
                             "follow them, or full_refresh)");
        }
        break;
      }
      case config::SyncMode::kCdc:
      case config::SyncMode::kCdcOnly: {
        if (sc.mode == config::SyncMode::kCdcOnly) {
          t->notes.push_back(
              "cdc_only: the table holds only the rows changed since the stream's first sync");
        }
        std::string lag;
        for (const VerifiedPart& p : parts) {
          lag = CdcLag(p);
          if (!lag.empty()) {
            if (parts.size() > 1) lag = p.Label() + ": " + lag;
            break;
          }
        }
        t->notes.push_back(!lag.empty() ? lag
                                        : "cdc: changes made since the last sync show here as "
                                          "differences (replication lag) until a sync applies "
                                          "them; run ferry sync --once and verify again");
        break;
      }
    }
  }

  // Whether the stream's change log explains the differences: changes are waiting to be applied
  // (replication lag), or none is (a divergence: no sync will mend it), or it cannot be told.
  std::string CdcLag(const VerifiedPart& p) {
    auto table_marker = dst_->ReadMarker(p.destination);
    if (!table_marker.ok()) return "";
    const Json marker = PartOfMarker(*table_marker, p.marker_part);
    // A backfill's cdc_start when its changes are not applied yet.
    auto proven = ProvenPosition(marker, "the table's marker", p.src->position_kind());
    if (!proven.ok() || !*proven) return "";
    const source::Position applied = **proven;
    if (p.src->SharedChangeLog()) return SharedLogLag(p, marker, applied);
    auto end = p.src->ChangeLogEnd(p.info);
    if (!end.ok()) return "";
    if (*end > applied) {
      return "cdc: replication lag — the source's change log reaches position " + end->ToString() +
             ", the table has the changes up to " + applied.ToString() +
             "; the differences include changes not yet synced: run ferry sync --once and verify "
             "again";
    }
    return "cdc: divergence — every change in the source's change log (up to position " +
           end->ToString() +
           ") is in the table, so these differences are not replication lag: no sync will mend "
           "them";
  }

  // A change log shared by every table (PostgreSQL): the log is looked into for changes of this
  // table after the position the table holds (the log moves on for other tables too).
  std::string SharedLogLag(const VerifiedPart& p, const Json& marker, source::Position applied) {
    auto changed = p.src->TableChanged(p.info, marker.value("table_id", ""));
    if (changed.ok() && !changed->empty()) {
      return "cdc: divergence — " + *changed + ", after position " + applied.ToString() +
             ", the position the table holds: no change in the log mends it. ferry sync stops at "
             "it and says how to start the stream over";
    }
    auto pending = p.src->SharedLogPending(p.info, applied);
    if (!pending.ok()) return "";
    const std::string where = "position " + applied.ToString() +
                              ", the position the table holds (the log reaches " +
                              pending->log_end.ToString() + ")";
    switch (pending->kind) {
      case source::Source::PendingChanges::Kind::kSome:
        return "cdc: replication lag — the source's change log holds changes of this table after " +
               where + ": the differences include changes not yet synced (" + pending->detail +
               "); run ferry sync --once and verify again";
      case source::Source::PendingChanges::Kind::kNone:
        return "cdc: divergence — the source's change log holds no change of this table after " +
               where + " (" + pending->detail +
               "), so no pending change explains these differences and no sync will mend them: "
               "the table was changed behind the pipeline's back, or the source changed in a way "
               "its log does not carry (a TRUNCATE ignored by source.truncate: ignore). A new "
               "backfill loads the table again: drop it in the destination and remove the "
               "stream's entry from the state file, then sync";
      case source::Source::PendingChanges::Kind::kUnknown:
        break;
    }
    return "cdc: the source's change log has moved on past " + where +
           "; whether it holds "
           "changes of this table is not known (" +
           pending->detail +
           "): the differences may be changes not yet synced; run ferry sync --once and verify "
           "again";
  }

  const VerifyOptions& options_;
  sink::Sink* dst_;
};

}  // namespace

Status RunVerify(config::PipelineConfig& cfg, const VerifyOptions& options,
                 std::vector<TableVerify>* out) {
  auto dst = sink::Sink::Open(cfg.destination, cfg.name);
  if (!dst.ok()) return dst.status().WithContext("destination");
  // The pipeline's streams (as the sync selects them), then options.tables; grouped by
  // destination table, in the order tables first appear.
  std::vector<std::unique_ptr<source::Source>> sources;
  std::vector<std::string> order, names;
  std::map<std::string, std::vector<VerifiedPart>> tables;
  std::set<std::string> found;
  for (config::SourceConfig& sc : cfg.sources) {
    FERRY_ASSIGN_OR_RETURN(OpenedSource opened, OpenSelected(sc, /*require_syncable=*/false));
    for (auto& info : opened.streams) {
      names.push_back(info.name);
      const auto& only = options.tables;
      if (!only.empty() && std::find(only.begin(), only.end(), info.name) == only.end()) continue;
      found.insert(info.name);
      const config::StreamConfig settings = StreamSettings(sc, info.name);
      // The transforms see the key the sync writes by.
      source::StreamInfo keyed = info;
      FERRY_RETURN_IF_ERROR(InSource(sc, ApplyKeyOverride(settings, &keyed)));
      FERRY_ASSIGN_OR_RETURN(auto transform, TransformOf(sc, settings, keyed));
      const std::string destination = DestinationName(sc, settings, info);
      const std::string table = (*dst)->TableName(destination);
      if (!tables.count(table)) order.push_back(table);
      VerifiedPart part{opened.src.get(), info, settings, &sc, std::move(transform), destination};
      tables[table].push_back(std::move(part));
    }
    sources.push_back(std::move(opened.src));
  }
  for (const auto& name : options.tables) {
    if (found.count(name)) continue;
    std::string listed;
    for (const auto& n : names) listed += (listed.empty() ? "" : ", ") + n;
    return Status::InvalidArgument("--table " + name + " is not a stream of the pipeline; its " +
                                   "streams are: " + (listed.empty() ? "(none)" : listed));
  }
  for (auto& [table, parts] : tables) {
    for (VerifiedPart& p : parts) {
      const size_t of_source = std::count_if(parts.begin(), parts.end(),
                                             [&](const VerifiedPart& o) { return o.cfg == p.cfg; });
      p.marker_part = MarkerPart(cfg, *p.cfg, p.info.name, of_source);
    }
  }
  // Every stream of a source is read at one point of it.
  for (auto& src : sources) FERRY_RETURN_IF_ERROR(src->BeginSnapshot());
  Verifier v(options, dst->get());
  for (const auto& table : order) {
    TableVerify t;
    Status s = v.Verify(tables[table], &t);
    if (!s.ok()) {
      t.error = s.message();
      FERRY_LOG(kWarn) << "verifying " << table << ": " << s.message();
    }
    out->push_back(std::move(t));
  }
  Status end;
  for (auto& src : sources) {
    Status e = src->EndSnapshot();
    if (end.ok()) end = e;
  }
  return end;
}

}  // namespace ferry::engine
