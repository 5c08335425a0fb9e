#include "ferry/source/postgres/pgoutput.h"

#include <chrono>
#include <cstdio>

namespace ferry::source::pg {
namespace {

// Microseconds between 1970-01-01 and PostgreSQL's epoch, 2000-01-01.
constexpr int64_t kMicrosFrom1970To2000 = 946684800LL * 1000000;

// A bounded reader over one message.
class Reader {
 public:
  explicit Reader(std::string_view d) : d_(d) {}
  bool ok() const { return ok_; }
  bool done() const { return p_ == d_.size(); }
  uint8_t U8() {
    if (!Need(1)) return 0;
    return static_cast<uint8_t>(d_[p_++]);
  }
  uint16_t U16() {
    if (!Need(2)) return 0;
    uint16_t v = static_cast<uint16_t>((static_cast<uint8_t>(d_[p_]) << 8) |
                                       static_cast<uint8_t>(d_[p_ + 1]));
    p_ += 2;
    return v;
  }
  uint32_t U32() {
    uint32_t hi = U16();
    return (hi << 16) | U16();
  }
  uint64_t U64() {
    uint64_t hi = U32();
    return (hi << 32) | U32();
  }
  std::string_view Bytes(size_t n) {
    if (!Need(n)) return {};
    std::string_view v = d_.substr(p_, n);
    p_ += n;
    return v;
  }
  std::string String() {
    if (!ok_) return {};
    size_t end = d_.find('\0', p_);
    if (end == std::string_view::npos) {
      ok_ = false;
      return {};
    }
    std::string v(d_.substr(p_, end - p_));
    p_ = end + 1;
    return v;
  }

 private:
  bool Need(size_t n) {
    if (!ok_ || d_.size() - p_ < n) {
      ok_ = false;
      return false;
    }
    return true;
  }
  std::string_view d_;
  size_t p_ = 0;
  bool ok_ = true;
};

Status Truncated(char type) {
  return Status::Corruption(std::string("a truncated or malformed pgoutput message '") + type +
                            "'");
}

bool ReadTuple(Reader& r, std::vector<TupleValue>* out) {
  uint16_t n = r.U16();
  if (!r.ok()) return false;
  out->resize(n);
  for (uint16_t i = 0; i < n; ++i) {
    TupleValue& v = (*out)[i];
    v.kind = static_cast<char>(r.U8());
    switch (v.kind) {
      case 'n':
      case 'u':
        break;
      case 't':
      case 'b': {
        uint32_t len = r.U32();
        if (len > (1u << 30)) return false;
        v.bytes = r.Bytes(len);
        break;
      }
      default:
        return false;
    }
    if (!r.ok()) return false;
  }
  return true;
}

}  // namespace

std::string FormatLsn(Lsn lsn) { return lsn == 0 ? "0/0" : Position::Lsn(lsn).ToString(); }

Result<Lsn> ParseLsn(std::string_view text) {
  size_t slash = text.find('/');
  auto hex = [](std::string_view s, uint64_t* v) {
    if (s.empty() || s.size() > 8) return false;
    *v = 0;
    for (char c : s) {
      int d = (c >= '0' && c <= '9')   ? c - '0'
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                       : -1;
      if (d < 0) return false;
      *v = (*v << 4) | static_cast<uint64_t>(d);
    }
    return true;
  };
  uint64_t hi = 0, lo = 0;
  if (slash == std::string_view::npos || !hex(text.substr(0, slash), &hi) ||
      !hex(text.substr(slash + 1), &lo)) {
    return Status::InvalidArgument("'" + std::string(text.substr(0, 40)) +
                                   "' is not a PostgreSQL LSN (like 16/B374D848)");
  }
  return (hi << 32) | lo;
}

Status ParseReplicationFrame(std::string_view data, ReplicationFrame* out) {
  *out = ReplicationFrame{};
  if (data.empty()) return Status::Corruption("an empty replication message");
  Reader r(data.substr(1));
  out->kind = data[0];
  if (out->kind == 'w') {
    out->wal_start = r.U64();
    out->wal_end = r.U64();
    r.U64();  // the server's clock
    if (!r.ok()) return Status::Corruption("a truncated XLogData message");
    out->payload = data.substr(25);
  } else if (out->kind == 'k') {
    out->wal_end = r.U64();
    r.U64();
    out->reply_requested = r.U8() != 0;
    if (!r.ok()) return Status::Corruption("a truncated keepalive message");
  }
  return Status::OK();
}

std::string StandbyStatusUpdate(Lsn written, Lsn flushed, bool reply_requested) {
  int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count() -
                kMicrosFrom1970To2000;
  std::string m(1, 'r');
  auto put64 = [&](uint64_t v) {
    for (int s = 56; s >= 0; s -= 8) m.push_back(static_cast<char>((v >> s) & 0xff));
  };
  put64(written);
  put64(flushed);
  put64(flushed);  // applied
  put64(static_cast<uint64_t>(now));
  m.push_back(reply_requested ? 1 : 0);
  return m;
}

Status ParsePgOutput(std::string_view data, PgOutputMessage* out, bool in_stream) {
  *out = PgOutputMessage{};
  if (data.empty()) return Status::Corruption("an empty pgoutput message");
  out->type = data[0];
  Reader r(data.substr(1));
  // Inside a stream block, the messages of the streamed transaction name its (sub)transaction.
  if (in_stream && std::string_view("RYIUDTM").find(out->type) != std::string_view::npos) {
    out->xid = r.U32();
  }
  switch (out->type) {
    case 'B':
      out->lsn = r.U64();
      out->commit_time_us = static_cast<int64_t>(r.U64()) + kMicrosFrom1970To2000;
      out->xid = r.U32();
      break;
    case 'C':
      r.U8();
      out->lsn = r.U64();
      out->end_lsn = r.U64();
      out->commit_time_us = static_cast<int64_t>(r.U64()) + kMicrosFrom1970To2000;
      break;
    case 'O':
      out->lsn = r.U64();
      out->relname = r.String();
      break;
    case 'R': {
      out->relid = r.U32();
      out->nspname = r.String();
      out->relname = r.String();
      out->replica_identity = static_cast<char>(r.U8());
      uint16_t n = r.U16();
      if (!r.ok()) return Truncated('R');
      out->columns.reserve(n);
      for (uint16_t i = 0; i < n && r.ok(); ++i) {
        RelationColumn c;
        c.key = (r.U8() & 1) != 0;
        c.name = r.String();
        c.type_oid = r.U32();
        c.typmod = static_cast<int32_t>(r.U32());
        out->columns.push_back(std::move(c));
      }
      break;
    }
    case 'Y':
      out->relid = r.U32();
      out->nspname = r.String();
      out->relname = r.String();
      break;
    case 'I':
      out->relid = r.U32();
      if (r.U8() != 'N' || !ReadTuple(r, &out->new_tuple)) return Truncated('I');
      break;
    case 'U': {
      out->relid = r.U32();
      char k = static_cast<char>(r.U8());
      if (k == 'K' || k == 'O') {
        out->old_kind = k;
        if (!ReadTuple(r, &out->old_tuple)) return Truncated('U');
        k = static_cast<char>(r.U8());
      }
      if (k != 'N' || !ReadTuple(r, &out->new_tuple)) return Truncated('U');
      break;
    }
    case 'D': {
      out->relid = r.U32();
      char k = static_cast<char>(r.U8());
      if (k != 'K' && k != 'O') return Truncated('D');
      out->old_kind = k;
      if (!ReadTuple(r, &out->old_tuple)) return Truncated('D');
      break;
    }
    case 'T': {
      uint32_t n = r.U32();
      out->truncate_options = r.U8();
      if (!r.ok() || n > (1u << 20)) return Truncated('T');
      for (uint32_t i = 0; i < n && r.ok(); ++i) out->truncated.push_back(r.U32());
      break;
    }
    case 'M': {
      r.U8();
      out->lsn = r.U64();
      out->relname = r.String();
      uint32_t len = r.U32();
      r.Bytes(len);
      break;
    }
    case 'S':
      out->xid = r.U32();
      r.U8();  // first segment
      break;
    case 'E':
      break;
    case 'c':
      out->xid = r.U32();
      r.U8();
      out->lsn = r.U64();
      out->end_lsn = r.U64();
      out->commit_time_us = static_cast<int64_t>(r.U64()) + kMicrosFrom1970To2000;
      break;
    case 'A':
      out->xid = r.U32();
      out->subxid = r.U32();
      if (r.ok() && !r.done()) {  // protocol 4 with parallel streaming: abort LSN and time
        r.U64();
        r.U64();
      }
      break;
    default:
      return Status::Corruption(std::string("an unknown pgoutput message type '") + out->type +
                                "'");
  }
  if (!r.ok()) return Truncated(out->type);
  if (!r.done()) {
    return Status::Corruption(std::string("pgoutput message '") + out->type +
                              "' has bytes after its end");
  }
  return Status::OK();
}

}  // namespace ferry::source::pg
