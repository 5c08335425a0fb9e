#include "ferry/source/position.h"

#include <cstdio>
#include <ostream>

#include "ferry/base/assert.h"

namespace ferry::source {

Position Position::Sequence(int64_t n) {
  FERRY_CHECK(n >= 0);
  return n == 0 ? Position() : Position(Kind::kSequence, static_cast<uint64_t>(n), 0);
}

Position Position::Lsn(uint64_t lsn) {
  return lsn == 0 ? Position() : Position(Kind::kLsn, lsn, 0);
}

Position Position::Binlog(uint32_t file, uint64_t offset) {
  return Position(Kind::kBinlog, file, offset);
}

std::string_view Position::KindName(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kSequence:
      return "sequence";
    case Kind::kLsn:
      return "lsn";
    case Kind::kBinlog:
      return "binlog";
  }
  return "?";
}

Result<Position> Position::FromJson(const nlohmann::json& j, Kind kind, std::string_view what) {
  auto bad = [&](std::string_view why) {
    return Status::Corruption(std::string(what) + " " + j.dump() + " " + std::string(why));
  };
  if (j.is_number_integer()) {
    if (!j.is_number_unsigned() && j.get<int64_t>() < 0) return bad("is negative");
    const uint64_t n = j.get<uint64_t>();
    if (n == 0) return Position();
    switch (kind) {
      case Kind::kSequence:
        if (n > static_cast<uint64_t>(INT64_MAX)) return bad("is out of range");
        return Sequence(static_cast<int64_t>(n));
      case Kind::kLsn:
        return Lsn(n);
      default:
        return bad("is a number, not a " + std::string(KindName(kind)) + " position");
    }
  }
  if (j.is_object() && kind == Kind::kBinlog) {
    const auto file = j.find("file"), offset = j.find("offset");
    if (file == j.end() || offset == j.end() || !file->is_number_unsigned() ||
        !offset->is_number_unsigned() || file->get<uint64_t>() > UINT32_MAX) {
      return bad("is not a binlog position ({\"file\": N, \"offset\": M})");
    }
    return Binlog(static_cast<uint32_t>(file->get<uint64_t>()), offset->get<uint64_t>());
  }
  return bad("is not a " + std::string(KindName(kind)) + " position");
}

nlohmann::json Position::ToJson() const {
  switch (kind_) {
    case Kind::kNone:
      return 0;
    case Kind::kSequence:
      return static_cast<int64_t>(major_);
    case Kind::kLsn:
      // The number, as records always held it: an int64 while it fits (every real LSN).
      if (major_ <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(major_);
      return major_;
    case Kind::kBinlog:
      return {{"file", major_}, {"offset", minor_}};
  }
  return 0;
}

std::string Position::ToString() const {
  char buf[48];
  switch (kind_) {
    case Kind::kNone:
      return "the start";
    case Kind::kSequence:
      return "#" + std::to_string(major_);
    case Kind::kLsn:
      std::snprintf(buf, sizeof buf, "%X/%X", static_cast<unsigned>(major_ >> 32),
                    static_cast<unsigned>(major_ & 0xffffffffu));
      return buf;
    case Kind::kBinlog:
      std::snprintf(buf, sizeof buf, "binlog %06u:%llu", static_cast<unsigned>(major_),
                    static_cast<unsigned long long>(minor_));
      return buf;
  }
  return "?";
}

std::strong_ordering Position::operator<=>(const Position& other) const {
  if (none() || other.none()) return other.none() <=> none();
  FERRY_CHECK_MSG(kind_ == other.kind_, "positions of two kinds of log compared");
  if (auto c = major_ <=> other.major_; c != 0) return c;
  return minor_ <=> other.minor_;
}

std::ostream& operator<<(std::ostream& os, const Position& p) { return os << p.ToString(); }

}  // namespace ferry::source
