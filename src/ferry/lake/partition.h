// Iceberg partition specs: the transforms (identity, year, month, day, hour, bucket[N],
// truncate[W], void) as the table spec defines them, the spec's JSON, the terms users write in
// `partition_by` ("day(created_at)", "bucket(16, id)", "region", "truncate(4, sku)"), and a
// Partitioner that computes a row's partition tuple from a Batch.
//
// Values follow Iceberg's single-value serialization wherever they leave memory (manifest
// partition tuples are Avro, field summaries' bounds are these bytes). bucket[N] hashes with
// Murmur3 x86 32-bit (seed 0) over the spec's byte forms; its results match the spec's examples.
//
// Thread-safety: values only; a Partitioner is used by one thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/base/status.h"
#include "ferry/types/batch.h"
#include "ferry/types/data_type.h"

namespace ferry::lake {

enum class TransformKind { kIdentity, kYear, kMonth, kDay, kHour, kBucket, kTruncate, kVoid };

struct Transform {
  TransformKind kind = TransformKind::kIdentity;
  int32_t param = 0;  // bucket[N]'s N, truncate[W]'s W

  // Iceberg's spelling: "identity", "day", "bucket[16]", "truncate[4]", "void", ...; kNotSupported
  // for a transform ferry does not know (a newer spec's), naming it.
  static Result<Transform> Parse(std::string_view text);
  std::string ToString() const;
  // The type of the partition values for a source column of type `source`: the source type for
  // identity, truncate and void, int for the others. kInvalidArgument when the transform does not
  // apply to the type (day of a string, truncate of a timestamp, anything of a list), naming both.
  Result<DataType> ResultType(const DataType& source) const;
  bool operator==(const Transform& o) const { return kind == o.kind && param == o.param; }
};

// Iceberg's Murmur3 x86 32-bit hash (seed 0) of `bytes`.
int32_t Murmur3(std::string_view bytes);

struct PartitionField {
  int32_t source_id = 0;
  int32_t field_id = 0;  // 1000 and up
  std::string name;
  Transform transform;
};

struct PartitionSpec {
  int32_t spec_id = 0;
  std::vector<PartitionField> fields;

  bool unpartitioned() const;  // no field, or void fields only
  nlohmann::json FieldsJson() const;
  nlohmann::json ToJson() const;  // {"spec-id": N, "fields": [...]}
  static Result<PartitionSpec> FromJson(const nlohmann::json& j);
  // The same source columns through the same transforms, in the same order (ids and names aside).
  bool SameLayout(const PartitionSpec& o) const;
  // "day(created_at), bucket[16](id)" for messages; "unpartitioned" when there is no field.
  std::string Describe(const Schema& schema) const;
};

// Builds a spec (spec_id 0, field ids from 1000) from `partition_by` terms over `schema`'s
// columns: "col" (identity), "year(col)", "month(col)", "day(col)", "hour(col)",
// "bucket(N, col)", "truncate(W, col)", "void(col)", "identity(col)"; Iceberg's "bucket[N](col)"
// spelling too. Field names as Java Iceberg makes them: col, col_year, col_month, col_day,
// col_hour, col_bucket, col_trunc, col_null. kInvalidArgument names the term and what is wrong
// (unknown column, a transform that does not fit its type, N or W not positive, a column twice
// through the same transform).
Result<PartitionSpec> ParsePartitionBy(const std::vector<std::string>& terms, const Schema& schema);

// One partition value: null, or the transform's result in the form of its result type (ints,
// dates, times and timestamps in `i`, floats in `f`, decimals' unscaled value in `dec`, strings,
// binary and uuids in `bytes`).
struct PartitionValue {
  bool null = true;
  int64_t i = 0;
  double f = 0;
  __int128 dec = 0;
  std::string bytes;
  // Floats compare by their bits, as PartitionKey does (a NaN partition equals itself).
  bool operator==(const PartitionValue& o) const {
    return null == o.null && i == o.i && std::memcmp(&f, &o.f, sizeof f) == 0 && dec == o.dec &&
           bytes == o.bytes;
  }
};
using PartitionTuple = std::vector<PartitionValue>;

// Iceberg's single-value serialization of a value of type `t` (not null).
std::string SingleValueBytes(const DataType& t, const PartitionValue& v);
// Orders two non-null values of type `t` (for the manifest list's bounds): <0, 0, >0.
int CompareValues(const DataType& t, const PartitionValue& a, const PartitionValue& b);
// A value as the Iceberg partition path shows it ("2024-01-31", "3", "null"), for messages and
// file names.
std::string ValueText(const DataType& t, const PartitionValue& v);

// Computes partition tuples of a table's rows.
class Partitioner {
 public:
  // kInvalidArgument when a field's source column is missing from `schema` or the transform does
  // not fit its type (ResultType's message).
  static Result<Partitioner> Make(const PartitionSpec& spec, const Schema& schema);

  const PartitionSpec& spec() const { return spec_; }
  // The result type of each field.
  const std::vector<DataType>& types() const { return types_; }
  // The tuple of row `row` of `batch` (a batch of `schema`).
  PartitionTuple Of(const Batch& batch, size_t row) const;
  // The same into `out`, reusing its storage (one tuple per row without allocating).
  void Into(const Batch& batch, size_t row, PartitionTuple* out) const;
  // Whether every field's value is an integer computed from an integer, date, time or timestamp
  // column (or void): then IntsOf computes the tuples of a whole batch a column at a time.
  bool int_valued() const { return int_valued_; }
  // For int_valued() specs: field f's value at row r of `batch` in (*values)[f * rows + r], and
  // whether it is null in (*nulls)[f * rows + r] (rows = batch.num_rows()); the values Of gives.
  void IntsOf(const Batch& batch, std::vector<int64_t>* values, std::vector<uint8_t>* nulls) const;
  // Row `row`'s tuple from IntsOf's output.
  void IntsTuple(const std::vector<int64_t>& values, const std::vector<uint8_t>& nulls, size_t rows,
                 size_t row, PartitionTuple* out) const;
  // "created_at_day=2024-01-31/id_bucket=3": a tuple as a path of the table's data folder.
  std::string Path(const PartitionTuple& t) const;

 private:
  PartitionSpec spec_;
  std::vector<DataType> types_;
  std::vector<DataType> source_types_;
  std::vector<size_t> columns_;  // the source column of each field in the schema
  bool int_valued_ = true;
};

// A byte string equal for equal tuples and different otherwise (a map key).
std::string PartitionKey(const PartitionTuple& t);

// Applies `t` to row `row` of `col` (of type `source`).
PartitionValue ApplyTransform(const Transform& t, const DataType& source, const Column& col,
                              size_t row);

}  // namespace ferry::lake
