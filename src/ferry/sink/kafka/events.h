// The Kafka destination's records, without a client library: topic names from the `topic`
// template, record keys, and change events as JSON (kafka_sink.h has the layout).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/base/status.h"
#include "ferry/types/batch.h"

namespace ferry::sink::kafka {

// What a record's value holds.
enum class Format {
  kEnvelope,  // "json": {before, after, op, source, ts_ms}
  kFlat,      // "flat": the row's columns, with __op and __deleted
};

// The topic of `table` ("public.orders") in `pipeline` by `templ`: {pipeline}, {table}, {schema}
// (the part of the table's name before its last '.', "" when none) and {name} (after it) are
// replaced; every character Kafka does not allow in a topic name (anything but ASCII letters,
// digits, '.', '_' and '-') becomes '_'. kInvalidArgument naming the template when the result is
// empty, "." or "..", longer than 249 characters, or the template has an unknown {placeholder}.
Result<std::string> TopicName(std::string_view templ, const std::string& pipeline,
                              const std::string& table);

// Appends `s` as a JSON string; kInvalidArgument when `s` is not UTF-8 (the caller names the
// column).
Status AppendJsonString(std::string_view s, std::string* out);
// Appends row `row` of `col` as a JSON value: null; true/false; integers; floats by their
// shortest decimal ("NaN", "Infinity", "-Infinity" as strings); decimals, dates, times,
// timestamps and uuids as strings in ferry's text forms (types/value_text.h); text as strings;
// binary as base64 strings; lists as arrays of the same.
Status AppendJsonValue(const Column& col, size_t row, std::string* out);

// Appends to `col` the value that `v` (in AppendJsonValue's form for col's type) holds;
// kInvalidArgument saying what `v` is when it is not such a value.
Status AppendFromJson(const nlohmann::json& v, Column* col);

// Where a change came from, for an event's `source` block.
struct EventSource {
  char op = 'r';          // c (insert), u (update), d (delete), r (read: a load or a window)
  bool snapshot = false;  // a load's row
  int64_t commit_us = INT64_MIN;  // the source's commit time; INT64_MIN: not known
  std::string position;           // the change's log position; empty: none
  std::string_view commit;        // the id of the producer transaction writing the event
};

// Encodes the rows of one table's batches (of `schema`) as record keys and values.
class EventEncoder {
 public:
  EventEncoder(std::shared_ptr<const Schema> schema, Format format, std::string pipeline,
               std::string table);

  bool keyed() const { return !keys_.empty(); }
  // The key of row `row`: a JSON object of the key columns, {"id":5}. Empty when the table has
  // no key (records without keys).
  Status Key(const Batch& b, size_t row, std::string* out) const;
  // The value of row `row` as it is now (an insert, update or read); `now_ms` is ts_ms.
  Status Row(const Batch& b, size_t row, const EventSource& src, int64_t now_ms,
             std::string* out) const;
  // The value of a delete of row `row` (only the key columns are read: `before` holds them).
  Status Delete(const Batch& b, size_t row, const EventSource& src, int64_t now_ms,
                std::string* out) const;

 private:
  Status Object(const Batch& b, size_t row, const std::vector<size_t>& cols, bool close,
                std::string* out) const;
  void Source(const EventSource& src, std::string* out) const;

  std::shared_ptr<const Schema> schema_;
  Format format_;
  std::string source_head_;         // {"pipeline":...,"table":..., quoted once
  std::vector<size_t> all_, keys_;  // column positions
  std::vector<std::string> names_;  // each column's name as a JSON string, with ':'
};

}  // namespace ferry::sink::kafka
