#include "ferry/transform/transform.h"

#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>

#include "ferry/types/value_text.h"

namespace ferry::transform {
namespace {

std::string List(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? std::string("none") : out;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

// The column an expression is, when it is one column's name (bare or double-quoted).
std::string ColumnOf(const std::string& expr) {
  const std::string t = Trim(expr);
  if (t.size() >= 2 && t.front() == '"' && t.back() == '"') {
    std::string out;
    for (size_t i = 1; i + 1 < t.size(); ++i) {
      if (t[i] == '"') {
        if (t[i + 1] != '"') return "";
        ++i;
      }
      out += t[i];
    }
    return out;
  }
  for (char c : t) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return "";
  }
  return t;
}

// The type a top-level CAST(... AS T) gives, by SQLite's rules for a declared type's affinity;
// none for NUMERIC (it may be an integer or a real) or no CAST.
std::optional<DataType> CastType(const std::string& expr) {
  const std::string t = Upper(Trim(expr));
  if (t.rfind("CAST", 0) != 0) return std::nullopt;
  size_t open = t.find_first_not_of(" \t\r\n", 4);
  if (open == std::string::npos || t[open] != '(' || t.back() != ')') return std::nullopt;
  // The parenthesis that opens must close at the end: CAST(a AS INT) + 1 is not a cast.
  int depth = 0;
  bool quoted = false;
  char quote = 0;
  for (size_t i = open; i < t.size(); ++i) {
    const char c = t[i];
    if (quoted) {
      if (c == quote) quoted = false;
      continue;
    }
    if (c == '\'' || c == '"' || c == '`' || c == '[') {
      quoted = true;
      quote = c == '[' ? ']' : c;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')' && --depth == 0 && i + 1 != t.size()) {
      return std::nullopt;
    }
  }
  const size_t as = t.rfind(" AS ");
  if (as == std::string::npos) return std::nullopt;
  const std::string type = Trim(t.substr(as + 4, t.size() - 1 - (as + 4)));
  if (type.find("INT") != std::string::npos) return DataType::Int64();
  if (type.find("CHAR") != std::string::npos || type.find("CLOB") != std::string::npos ||
      type.find("TEXT") != std::string::npos) {
    return DataType::String();
  }
  if (type.find("BLOB") != std::string::npos) return DataType::Binary();
  if (type.find("REAL") != std::string::npos || type.find("FLOA") != std::string::npos ||
      type.find("DOUB") != std::string::npos) {
    return DataType::Float64();
  }
  return std::nullopt;
}

Status BadValue(const std::string& what, const std::string& column, const DataType& type,
                const std::string& value, const std::string& why) {
  return Status::InvalidArgument(what + ": computed column " + column + " (" + type.ToIceberg() +
                                 ") got " + value + (why.empty() ? "" : ": " + why) +
                                 "; change its expression (a CAST, a CASE for such rows) or its "
                                 "type");
}

// Row value `i` of an evaluated row into `col`, of the computed column's type.
Status AppendComputed(const Evaluator::Row& row, size_t i, Column* col, const std::string& what,
                      const std::string& name) {
  const int kind = row.type(i);
  if (kind == SQLITE_NULL) {
    col->AppendNull();
    return Status::OK();
  }
  const DataType& t = col->type();
  // The value as an error shows it (made only for an error: it converts the value to text).
  const auto shown = [&] {
    return kind == SQLITE_BLOB ? std::string("a blob")
                               : "'" + std::string(row.Text(i).substr(0, 80)) + "'";
  };
  switch (t.kind()) {
    case TypeKind::kBoolean:
      if (kind == SQLITE_INTEGER || kind == SQLITE_FLOAT) {
        col->AppendBool(row.Double(i) != 0);
        return Status::OK();
      }
      return BadValue(what, name, t, shown(), "booleans are numbers (0 is false)");
    case TypeKind::kInt32:
    case TypeKind::kInt64: {
      int64_t v = 0;
      if (kind == SQLITE_INTEGER) {
        v = row.Int(i);
      } else if (kind == SQLITE_FLOAT) {
        const double d = row.Double(i);
        if (!(std::trunc(d) == d && d >= -9.2233720368547758e18 && d < 9.2233720368547758e18)) {
          return BadValue(what, name, t, shown(), "not a whole number");
        }
        v = static_cast<int64_t>(d);
      } else {
        return BadValue(what, name, t, shown(), "not a number");
      }
      if (t.kind() == TypeKind::kInt32) {
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
          return BadValue(what, name, t, shown(), "out of range");
        }
        col->AppendInt32(static_cast<int32_t>(v));
      } else {
        col->AppendInt64(v);
      }
      return Status::OK();
    }
    case TypeKind::kFloat32:
    case TypeKind::kFloat64:
      if (kind != SQLITE_INTEGER && kind != SQLITE_FLOAT) {
        return BadValue(what, name, t, shown(), "not a number");
      }
      if (t.kind() == TypeKind::kFloat32) {
        col->AppendFloat(static_cast<float>(row.Double(i)));
      } else {
        col->AppendDouble(row.Double(i));
      }
      return Status::OK();
    case TypeKind::kString:
    case TypeKind::kBinary:
      col->AppendBytes(row.Text(i));
      return Status::OK();
    case TypeKind::kDecimal: {
      std::string text;
      if (kind == SQLITE_FLOAT) {
        const double d = row.Double(i);
        if (!std::isfinite(d)) return BadValue(what, name, t, shown(), "not a finite number");
        char buf[400];
        std::snprintf(buf, sizeof buf, "%.*f", t.scale(), d);
        text = buf;
      } else {
        text = std::string(row.Text(i));
      }
      Status s = AppendTextValue(text, col);
      return s.ok() ? s : BadValue(what, name, t, shown(), s.message());
    }
    default: {
      if (kind != SQLITE_TEXT) return BadValue(what, name, t, shown(), "not text");
      Status s = AppendTextValue(row.Text(i), col);
      return s.ok() ? s : BadValue(what, name, t, shown(), s.message());
    }
  }
}

}  // namespace

Result<std::shared_ptr<Transform>> Transform::Make(const config::StreamConfig& sc,
                                                   const source::StreamInfo& table,
                                                   const std::string& source_table) {
  std::shared_ptr<Transform> t(new Transform());
  t->what_ = "stream " + sc.name;
  const std::string& what = t->what_;
  std::vector<std::string> names;
  for (const auto& c : table.columns) names.push_back(c.name);
  auto known = [&](const std::string& c) {
    return std::find(names.begin(), names.end(), c) != names.end();
  };
  auto unknown = [&](const std::string& key, const std::string& c) {
    return Status::InvalidArgument(what + ": " + key + " names column '" + c + "', which table " +
                                   table.name + " does not have (names are matched exactly, " +
                                   "case included); its columns: " + List(names));
  };
  // The columns kept, in the table's order.
  std::vector<bool> keep(names.size(), !sc.columns.has_value());
  if (sc.columns) {
    for (const auto& c : *sc.columns) {
      if (!known(c)) return unknown("columns", c);
      keep[static_cast<size_t>(std::find(names.begin(), names.end(), c) - names.begin())] = true;
    }
  }
  for (const auto& c : sc.exclude_columns) {
    if (!known(c)) return unknown("exclude_columns", c);
    keep[static_cast<size_t>(std::find(names.begin(), names.end(), c) - names.begin())] = false;
  }
  const std::string setting = sc.columns ? "columns" : "exclude_columns";
  const std::string fix = sc.columns ? "list it in columns" : "remove it from exclude_columns";
  for (size_t i = 0; i < names.size(); ++i) {
    if (keep[i]) continue;
    if (table.columns[i].pk_position > 0) {
      return Status::InvalidArgument(
          what + ": " + setting + " leaves out key column " + names[i] +
          ", and rows are written by their key; " + fix +
          " (or set the stream's primary_key to columns that are copied)");
    }
    if (sc.cursor && *sc.cursor == names[i] && sc.mode == config::SyncMode::kIncremental) {
      return Status::InvalidArgument(what + ": " + setting + " leaves out cursor column " +
                                     names[i] + ", which each window is read by; " + fix);
    }
  }
  t->read_ = table;
  t->read_.columns.clear();
  for (size_t i = 0; i < names.size(); ++i) {
    if (!keep[i]) continue;
    source::ColumnInfo c = table.columns[i];
    c.ordinal = static_cast<int>(i);
    t->read_.columns.push_back(c);
    t->from_table_.push_back(i);
  }
  if (t->read_.columns.empty()) {
    return Status::InvalidArgument(what + ": " + setting + " leaves no column to copy");
  }
  auto& candidates = t->read_.cursor_candidates;
  candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                  [&](const std::string& c) {
                                    const auto at = std::find(names.begin(), names.end(), c);
                                    return at != names.end() &&
                                           !keep[static_cast<size_t>(at - names.begin())];
                                  }),
                   candidates.end());
  t->table_schema_ = std::make_shared<const Schema>(table.ToSchema());
  t->read_schema_ = std::make_shared<const Schema>(t->read_.ToSchema());

  // The destination's names: renames, then the computed columns after the copied ones.
  t->output_ = *t->read_schema_;
  for (const auto& [from, to] : sc.rename_columns) {
    if (!known(from)) return unknown("rename_columns", from);
    auto f = std::find_if(t->output_.fields.begin(), t->output_.fields.end(),
                          [&](const Field& x) { return x.name == from; });
    if (f == t->output_.fields.end()) {
      return Status::InvalidArgument(what + ": rename_columns renames column " + from + ", which " +
                                     setting + " leaves out");
    }
    f->name = to;
  }
  std::set<std::string> seen;
  for (const auto& f : t->output_.fields) {
    if (!seen.insert(f.name).second) {
      return Status::InvalidArgument(what + ": rename_columns gives two columns the name " +
                                     f.name + "; every column of the destination needs its own");
    }
  }
  int32_t next_id = t->output_.HighestFieldId();
  for (const auto& c : sc.add_columns) {
    if (c.name.rfind("_ferry_", 0) == 0) {
      return Status::InvalidArgument(what + ": add_columns." + c.name +
                                     ": names starting with _ferry_ are ferry's own; pick another");
    }
    if (!seen.insert(c.name).second) {
      return Status::InvalidArgument(what + ": add_columns." + c.name +
                                     " has the name of a column the destination already gets; "
                                     "pick another (or rename the source's column)");
    }
    Field f;
    f.id = ++next_id;
    f.name = c.name;
    f.required = false;
    if (!c.type.empty()) {
      auto type = DataType::FromIceberg(c.type);
      if (!type.ok() || type->is_list()) {
        return Status::InvalidArgument(
            what + ": add_columns." + c.name + " has type '" + c.type +
            "'; types are boolean, int, long, float, double, decimal(P,S), date, time, "
            "timestamp, timestamptz, string, binary, uuid");
      }
      f.type = *type;
    } else if (const std::string col = ColumnOf(c.expr);
               !col.empty() && t->read_schema_->FindByName(col) != nullptr &&
               !t->read_schema_->FindByName(col)->type.is_list()) {
      f.type = t->read_schema_->FindByName(col)->type;
    } else if (auto cast = CastType(c.expr)) {
      f.type = *cast;
    } else {
      return Status::InvalidArgument(
          what + ": add_columns." + c.name + " (\"" + c.expr +
          "\"): its type cannot be told from the expression; give it one, e.g. {expr: \"" + c.expr +
          "\", type: long} (boolean, int, long, float, double, decimal(P,S), date, "
          "time, timestamp, timestamptz, string, binary, uuid), or wrap it in CAST(... AS "
          "INTEGER | REAL | TEXT)");
    }
    t->output_.fields.push_back(f);
    t->exprs_.push_back(c.expr);
  }
  // Metadata columns, after the computed ones.
  t->source_table_ = source_table;
  for (const auto& m : sc.metadata_columns) {
    if (!seen.insert(m).second) {
      return Status::InvalidArgument(what + ": the table has a column named " + m +
                                     ", the name of a metadata column; rename the column "
                                     "(rename_columns) or leave the metadata column out");
    }
    Field f;
    f.id = ++next_id;
    f.name = m;
    if (m == "_ferry_source_table") {
      f.type = DataType::String();
      f.required = true;
      t->metadata_.push_back(Metadata::kSourceTable);
      // Rows of tables merged into one keep equal keys apart.
      if (!t->output_.identifier_field_ids.empty()) {
        t->output_.identifier_field_ids.insert(t->output_.identifier_field_ids.begin(), f.id);
      }
    } else if (m == "_ferry_synced_at") {
      f.type = DataType::TimestampTz();
      t->metadata_.push_back(Metadata::kSyncedAt);
    } else if (m == "_ferry_op") {
      f.type = DataType::String();
      f.required = true;
      t->metadata_.push_back(Metadata::kOp);
    } else if (m == "_ferry_source_ts") {
      f.type = DataType::TimestampTz();
      t->metadata_.push_back(Metadata::kSourceTs);
    } else {
      f.type = DataType::String();
      t->metadata_.push_back(Metadata::kPosition);
    }
    t->output_.fields.push_back(f);
  }
  if (sc.soft_deletes) {
    if (!seen.insert(config::kDeletedColumn).second) {
      return Status::InvalidArgument(what + ": the table has a column named " +
                                     config::kDeletedColumn +
                                     ", the column deletes: soft adds; rename the column "
                                     "(rename_columns) or use deletes: hard");
    }
    Field f;
    f.id = ++next_id;
    f.name = config::kDeletedColumn;
    f.type = DataType::Boolean();
    t->output_.fields.push_back(f);
    t->soft_deletes_ = true;
  }
  t->filter_ = sc.filter;
  if (t->evaluates()) {
    auto ev = Evaluator::Make(*t->read_schema_, t->filter_, t->exprs_, what);
    if (!ev.ok()) {
      std::string m = ev.status().message();
      // A column the table has but the stream does not read: say so.
      const std::string marker = "no such column: ";
      if (const size_t at = m.find(marker); at != std::string::npos) {
        std::string col = m.substr(at + marker.size());
        col = col.substr(0, col.find_first_of(" ("));
        if (known(col)) {
          return Status::InvalidArgument(m + "; column " + col + " is left out by " + setting +
                                         ": " + fix + " to use it here");
        }
      }
      return ev.status();
    }
    t->Give(std::move(*ev));
  }
  return t;
}

std::string Transform::Describe() const {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  const size_t copied = read_schema_->fields.size();
  if (copied != table_schema_->fields.size()) {
    std::string left;
    for (const auto& f : table_schema_->fields) {
      if (read_schema_->FindByName(f.name) == nullptr) left += (left.empty() ? "" : " ") + f.name;
    }
    add(std::to_string(copied) + " of " + std::to_string(table_schema_->fields.size()) +
        " columns (left out: " + left + ")");
  }
  std::string renamed;
  for (size_t i = 0; i < copied; ++i) {
    if (read_schema_->fields[i].name != output_.fields[i].name) {
      renamed += (renamed.empty() ? "" : " ") + read_schema_->fields[i].name + " -> " +
                 output_.fields[i].name;
    }
  }
  if (!renamed.empty()) add("renamed: " + renamed);
  if (!filter_.empty()) add("filter: " + filter_);
  for (size_t i = 0; i < exprs_.size(); ++i) {
    const Field& f = output_.fields[copied + i];
    add("computed: " + f.name + " " + f.type.ToIceberg());
  }
  for (size_t m = 0; m < metadata_.size(); ++m) {
    add("metadata: " + output_.fields[copied + exprs_.size() + m].name);
  }
  if (soft_deletes_) add(std::string("deletes: soft (") + config::kDeletedColumn + ")");
  return out;
}

Result<std::unique_ptr<Evaluator>> Transform::Take() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      auto e = std::move(idle_.back());
      idle_.pop_back();
      return e;
    }
  }
  return Evaluator::Make(*read_schema_, filter_, exprs_, what_);
}

void Transform::Give(std::unique_ptr<Evaluator> e) const {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(e));
}

Status Transform::Apply(Batch& in, bool keyed, bool deletes,
                        const std::shared_ptr<const Schema>& out_schema, Batch* out,
                        Batch* removed) const {
  const size_t copied = read_schema_->fields.size();
  std::vector<RowOrigin> origins;
  std::swap(origins, in.origins());
  // Changes carry every column of the table: keep the chosen ones.
  std::optional<Batch> projected;
  Batch* src = &in;
  if (in.num_columns() != copied) {
    projected.emplace(read_schema_);
    for (size_t i = 0; i < copied; ++i) std::swap(projected->column(i), in.column(from_table_[i]));
    src = &*projected;
  }
  *out = Batch(out_schema);
  // Soft deletes: a delete carries the row's last values and is written as that row, marked
  // deleted, through the same filter (a row the filter rejects is not in the destination: its
  // delete stays one) and computed columns.
  const bool soft = deletes && soft_deletes_;
  if ((deletes && !soft) || !evaluates()) {
    const size_t rows = src->num_rows();
    for (size_t i = 0; i < copied; ++i) std::swap(out->column(i), src->column(i));
    for (size_t i = copied; i < copied + exprs_.size(); ++i) {
      for (size_t r = 0; r < rows; ++r) out->column(i).AppendNull();
    }
    in.Clear();
    AddMetadata(out, soft, origins, nullptr);
    out->origins() = std::move(origins);
    return Status::OK();
  }
  const size_t rows_in = src->num_rows();
  FERRY_ASSIGN_OR_RETURN(auto ev, Take());
  std::vector<uint32_t> kept, dropped;
  Status s = Compute(*src, ev.get(), keyed || soft, out, removed, &kept, &dropped);
  Give(std::move(ev));
  in.Clear();
  FERRY_RETURN_IF_ERROR(s);
  AddMetadata(out, soft, origins, &kept);
  if (removed->num_rows() > 0) AddMetadata(removed, false, origins, &dropped);
  // The rows keep their origins (destinations that write changes as events read them).
  if (origins.size() == rows_in) {
    for (uint32_t r : kept) out->origins().push_back(origins[r]);
    for (uint32_t r : dropped) removed->origins().push_back(origins[r]);
  }
  return Status::OK();
}

void Transform::AddMetadata(Batch* b, bool deleted, const std::vector<RowOrigin>& origins,
                            const std::vector<uint32_t>* rows) const {
  const size_t rows_n = b->num_rows();
  if (soft_deletes_) {
    Column& col = b->column(b->num_columns() - 1);
    for (size_t r = 0; r < rows_n; ++r) col.AppendBool(deleted);
  }
  if (metadata_.empty()) return;
  const size_t first = read_schema_->fields.size() + exprs_.size();
  const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  static const RowOrigin kRead;
  const auto origin = [&](size_t r) -> const RowOrigin& {
    if (origins.empty()) return kRead;
    const size_t i = rows != nullptr ? (*rows)[r] : r;
    return i < origins.size() ? origins[i] : kRead;
  };
  for (size_t m = 0; m < metadata_.size(); ++m) {
    Column& col = b->column(first + m);
    for (size_t r = 0; r < rows_n; ++r) {
      switch (metadata_[m]) {
        case Metadata::kSourceTable:
          col.AppendBytes(source_table_);
          break;
        case Metadata::kSyncedAt:
          col.AppendInt64(now);
          break;
        case Metadata::kOp: {
          static constexpr const char* kNames[] = {"read", "insert", "update", "delete"};
          col.AppendBytes(kNames[static_cast<size_t>(origin(r).op) & 3]);
          break;
        }
        case Metadata::kSourceTs:
          if (origin(r).commit_us == RowOrigin::kNoTime) {
            col.AppendNull();
          } else {
            col.AppendInt64(origin(r).commit_us);
          }
          break;
        case Metadata::kPosition: {
          const source::Position p = source::Position::Of(origin(r));
          if (p.none()) {
            col.AppendNull();
          } else {
            col.AppendBytes(p.ToString());
          }
          break;
        }
      }
    }
  }
}

Status Transform::Compute(Batch& in, Evaluator* ev, bool keyed, Batch* out, Batch* removed,
                          std::vector<uint32_t>* kept_rows,
                          std::vector<uint32_t>* dropped_rows) const {
  const size_t copied = read_schema_->fields.size();
  std::vector<uint32_t>& kept = *kept_rows;
  std::vector<uint32_t>& dropped = *dropped_rows;
  kept.reserve(in.num_rows());
  FERRY_RETURN_IF_ERROR(
      ev->Run(in, keyed && !filter_.empty(), [&](size_t row, const Evaluator::Row& values) {
        if (keyed && !filter_.empty() && !values.matches()) {
          dropped.push_back(static_cast<uint32_t>(row));
          return Status::OK();
        }
        kept.push_back(static_cast<uint32_t>(row));
        for (size_t i = 0; i < exprs_.size(); ++i) {
          const size_t c = copied + i;
          FERRY_RETURN_IF_ERROR(
              AppendComputed(values, i, &out->column(c), what_, output_.fields[c].name));
        }
        return Status::OK();
      }));
  if (kept.size() == in.num_rows()) {
    // Swapped, not moved: `in` keeps valid empty columns for its source to fill again.
    for (size_t i = 0; i < copied; ++i) std::swap(out->column(i), in.column(i));
  } else {
    for (size_t i = 0; i < copied; ++i) {
      out->column(i).AppendRowsOf(in.column(i), kept.data(), kept.size());
    }
  }
  if (!dropped.empty()) {
    *removed = Batch(out->schema());
    for (size_t i = 0; i < copied; ++i) {
      removed->column(i).AppendRowsOf(in.column(i), dropped.data(), dropped.size());
    }
    for (size_t i = copied; i < copied + exprs_.size(); ++i) {
      for (size_t r = 0; r < dropped.size(); ++r) removed->column(i).AppendNull();
    }
  }
  return Status::OK();
}

}  // namespace ferry::transform
