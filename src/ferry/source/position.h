// A place in a change log: how far a stream's changes have been read, applied and recorded. Each
// kind of log defines its positions — their order, their form in the state file and in markers,
// and their text in logs and messages — and every component (sources, the engine's progress and
// coordinator, sinks' markers, `state`, `verify`) handles them only through this type.
//
//   kind       order                          JSON (state, markers)       text
//   none       before every other position    0                           "the start"
//   sequence   the number (SQLite's           the number: 42              "#42"
//              change-table row ids)
//   lsn        the WAL location (PostgreSQL)  the number: 23953464        "0/16D8A38"
//   binlog     file number, then offset       {"file": 3, "offset": 154}  "binlog 000003:154"
//              (MySQL/MariaDB)
//
// The JSON of sequences and LSNs is the bare number that ferry's records always held, so state
// files and markers written before this type read the same. Positions of two different kinds are
// never compared (a stream's positions all come from one source); `none` compares below any.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ferry/base/status.h"
#include "ferry/types/batch.h"

namespace ferry::source {

class Position {
 public:
  enum class Kind : uint8_t { kNone, kSequence, kLsn, kBinlog };

  // Before every change: nothing of the log is held.
  constexpr Position() = default;
  // 0 is `none` (no change has a sequence number or an LSN of 0).
  static Position Sequence(int64_t n);
  static Position Lsn(uint64_t lsn);
  // A MySQL/MariaDB binlog event's end: the file's number (mysql-bin.000003 -> 3) and offset.
  static Position Binlog(uint32_t file, uint64_t offset);

  // Reads the JSON a state file or a marker holds, for a log of `kind` (the source's); `what`
  // names the value in errors ("position", "cdc_start"). kCorruption for anything else: a value
  // of another form, a negative number, a binlog object without its two numbers.
  static Result<Position> FromJson(const nlohmann::json& j, Kind kind, std::string_view what);
  nlohmann::json ToJson() const;
  std::string ToString() const;

  Kind kind() const { return kind_; }
  bool none() const { return kind_ == Kind::kNone; }
  // The number of a sequence or LSN position (0 for none).
  int64_t sequence() const { return static_cast<int64_t>(major_); }
  uint64_t lsn() const { return major_; }
  uint32_t binlog_file() const { return static_cast<uint32_t>(major_); }
  uint64_t binlog_offset() const { return minor_; }

  // Order within one log; `none` first. Comparing positions of two logs is a programming error
  // (asserted).
  std::strong_ordering operator<=>(const Position& other) const;
  bool operator==(const Position& other) const { return (*this <=> other) == 0; }

  static std::string_view KindName(Kind kind);

  // A change's origin (types/batch.h) holds its position as raw numbers: these write and read
  // them.
  void StampOn(RowOrigin* origin) const {
    origin->position_kind = static_cast<uint8_t>(kind_);
    origin->position_major = major_;
    origin->position_minor = minor_;
  }
  static Position Of(const RowOrigin& origin) {
    if (origin.position_kind > static_cast<uint8_t>(Kind::kBinlog)) return Position();
    return Position(static_cast<Kind>(origin.position_kind), origin.position_major,
                    origin.position_minor);
  }

 private:
  constexpr Position(Kind kind, uint64_t major, uint64_t minor)
      : kind_(kind), major_(major), minor_(minor) {}

  Kind kind_ = Kind::kNone;
  uint64_t major_ = 0;  // sequence number, LSN, or binlog file number
  uint64_t minor_ = 0;  // binlog offset
};

// For logs and test failures: the position's text.
std::ostream& operator<<(std::ostream& os, const Position& p);

}  // namespace ferry::source
