// Small helpers every destination uses: names of ferry's own tables, a schema's key, the JSON
// ferry stores, fixed-width values of a batch. No destination's client library is needed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/base/status.h"
#include "ferry/types/batch.h"

namespace ferry::sink {

// ---- names ----

inline constexpr uint64_t kFnvOffset = 14695981039346656037ull;
inline constexpr uint64_t kLoadIdOffset = 1469598103934665603ull;
// FNV-1a 64 of `s`, continuing from `h`.
uint64_t Fnv1a64(std::string_view s, uint64_t h = kFnvOffset);
// 16 lowercase hex digits.
std::string Hex16(uint64_t v);
// The hex id of a load of the PostgreSQL and MySQL destinations: FNV-1a 64 of the parts, each
// followed by a NUL, from kLoadIdOffset. Names a load table after its pipeline, stream and run;
// it must stay the same in every version (a resumed load finds its table by it), which is why
// its offset is not FNV's.
std::string LoadId(const std::vector<std::string>& parts);
// ASCII letters lowered; other bytes as they are.
std::string Lower(std::string_view s);

// ---- a schema's key ----

// Whether field `id` is one of the key's columns.
bool IsKey(const Schema& s, int32_t id);
// The key's column names, in key order.
std::vector<std::string> KeyNames(const Schema& s);
// The key's column positions in s.fields, in key order.
std::vector<size_t> KeyPositions(const Schema& s);
// "(a, b)"
std::string JoinNames(const std::vector<std::string>& names);

// ---- tables of the SQL destinations ----

// The column of `columns` named `name` (compared byte for byte), or nullptr.
template <typename C>
const C* FindColumn(const std::vector<C>& columns, const std::string& name) {
  for (const C& c : columns) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// The names of the columns whose `position` in the primary key (1-based; 0: not a key column)
// is set, in key order.
template <typename C>
std::vector<std::string> PrimaryKeyOf(const std::vector<C>& columns, int C::*position) {
  std::vector<std::pair<int, std::string>> k;
  for (const C& c : columns) {
    if (c.*position > 0) k.emplace_back(c.*position, c.name);
  }
  std::sort(k.begin(), k.end());
  std::vector<std::string> out;
  for (auto& [pos, name] : k) out.push_back(std::move(name));
  return out;
}

// `schema`'s key from (key position, field id) pairs of the columns read back.
void SetKeyInOrder(std::vector<std::pair<int, int32_t>> key, Schema* schema);

// "a, b" of `s`'s columns `cols`, each quoted by `quote` and prefixed by `prefix`.
template <typename Quote>
std::string ColumnList(const Schema& s, const std::vector<size_t>& cols, Quote quote,
                       const char* prefix = "") {
  std::string out;
  for (size_t i : cols) {
    if (!out.empty()) out += ", ";
    out += prefix + quote(s.fields[i].name);
  }
  return out;
}

// kInvalidArgument naming both keys and the fix unless the table's primary key `table_key` is
// `source`'s (a source without a key takes any): changes are applied by key.
Status CheckSameKey(const std::vector<std::string>& table_key, const Schema& source,
                    const std::string& table);
// kInvalidArgument naming the table and the fix when it has no key (`has_key` false): rows
// cannot be upserted.
Status RequireKeyToUpsert(bool has_key, const std::string& table);
// "ALTER TABLE <table> a, b, ..." of the changes `alters` (not empty).
std::string AlterTableSql(const std::string& table, const std::vector<std::string>& alters);

// ---- values ----

// `j` as compact JSON; kInvalidArgument naming `what` when it holds text that is not UTF-8.
Result<std::string> DumpJson(const nlohmann::json& j, std::string_view what);

// The columns record ferry keeps beside a table whose declared types are loose (SQLite, Redis):
// an array with an entry per field, {name, type (Iceberg's spelling), required, key} and, for a
// list, element_required.
nlohmann::json ColumnsJson(const Schema& s);
// The field an entry of that record describes, with id `id` (a list's element id 0).
// kInvalidArgument (message: the entry) when it lacks a name or a type; kNotSupported (message:
// the type) when the type is not one ferry knows. A JSON exception may escape for an entry of the
// wrong form.
Result<Field> FieldFromColumnsEntry(const nlohmann::json& entry, int32_t id);
// The schema that record (an array) describes: ids 1..n, list elements after them, the key from
// the entries' key flags. kCorruption saying what is wrong with the record ("are empty"); a JSON
// exception may escape for an entry of the wrong form.
Result<Schema> SchemaFromColumnsJson(const nlohmann::json& arr);

// kInternal (a bug) unless `batch` has `schema`'s columns: kinds and scales, list elements alike.
// `table`: the table's name for the message.
Status CheckBatchColumns(const Batch& batch, const Schema& schema, const std::string& table);

}  // namespace ferry::sink
