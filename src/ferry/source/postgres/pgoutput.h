// The logical-replication stream of PostgreSQL's pgoutput plugin: the CopyData frames of a
// START_REPLICATION session ('w' XLogData, 'k' keepalive) and the pgoutput messages inside
// XLogData (protocol version 2+, with streamed in-progress transactions).
//
// Layouts (big-endian integers, NUL-terminated strings):
//   B  Int64 final_lsn, Int64 commit_ts, Int32 xid
//   C  Int8 flags, Int64 commit_lsn, Int64 end_lsn, Int64 commit_ts
//   R  Int32 relid, String namespace, String name, Int8 replica identity, Int16 ncols,
//      per column Int8 flags (1 = key), String name, Int32 type oid, Int32 typmod
//   I  Int32 relid, 'N' TupleData
//   U  Int32 relid, ['K' | 'O' TupleData], 'N' TupleData
//   D  Int32 relid, 'K' | 'O' TupleData
//   T  Int32 nrels, Int8 options, Int32 relid x nrels
//   Y  Int32 oid, String namespace, String name;  O  Int64 lsn, String name
//   M  Int8 flags, Int64 lsn, String prefix, Int32 length, bytes
//   S  Int32 xid, Int8 first segment (Stream Start);  E  (Stream Stop)
//   c  Int32 xid, Int8 flags, Int64 commit_lsn, Int64 end_lsn, Int64 commit_ts (Stream Commit)
//   A  Int32 xid, Int32 subxid [, Int64 abort_lsn, Int64 abort_ts] (Stream Abort)
//   Between S and E, R Y I U D T M start with the Int32 xid of the (sub)transaction that made them.
//   TupleData: Int16 ncols, per column 'n' (NULL) | 'u' (unchanged TOASTed value, not sent) |
//              't' Int32 length + text | 'b' Int32 length + binary send format
//
// Every read is bounded by the message: a truncated or malformed message is kCorruption, never an
// over-read. Views in a parsed message point into the bytes given to the parser.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/source/position.h"

namespace ferry::source::pg {

using Lsn = uint64_t;

// "16/B374D848" (the upper and lower 32 bits in hex, as PostgreSQL prints an LSN).
std::string FormatLsn(Lsn lsn);
// Accepts zero-padded halves too; kInvalidArgument for anything else.
Result<Lsn> ParseLsn(std::string_view text);

// One CopyData message from the server.
struct ReplicationFrame {
  char kind = 0;                 // 'w' XLogData, 'k' keepalive, anything else: ignore
  Lsn wal_start = 0;             // 'w'
  Lsn wal_end = 0;               // 'w' and 'k': the server's position
  bool reply_requested = false;  // 'k'
  std::string_view payload;      // 'w': one pgoutput message
};
Status ParseReplicationFrame(std::string_view data, ReplicationFrame* out);

// The standby status update ('r'): write, flush and apply positions, the client clock.
std::string StandbyStatusUpdate(Lsn written, Lsn flushed, bool reply_requested);

struct TupleValue {
  char kind = 'n';  // 'n' NULL, 'u' unchanged TOAST, 't' text, 'b' binary
  std::string_view bytes;
};

struct RelationColumn {
  bool key = false;
  std::string name;
  uint32_t type_oid = 0;
  int32_t typmod = -1;
};

struct PgOutputMessage {
  char type = 0;
  // B: final_lsn; C: commit_lsn
  Lsn lsn = 0;
  Lsn end_lsn = 0;  // C: the end of the commit record: the position to acknowledge
  // B, C, c: when the transaction committed on the server, microseconds since the Unix epoch.
  int64_t commit_time_us = 0;
  uint32_t xid = 0;     // B; S, c, A: the streamed transaction; in a stream block: its subxact
  uint32_t subxid = 0;  // A: the subtransaction rolled back (== xid: the whole transaction)
  uint32_t relid = 0;   // R, I, U, D, Y (type oid)
  // R, Y
  std::string nspname;
  std::string relname;
  char replica_identity = 'd';
  std::vector<RelationColumn> columns;
  // I, U, D: the old tuple's kind ('K' key only, 'O' whole old row, 0 none)
  char old_kind = 0;
  std::vector<TupleValue> old_tuple;
  std::vector<TupleValue> new_tuple;
  // T
  std::vector<uint32_t> truncated;
  uint8_t truncate_options = 0;  // 1 CASCADE, 2 RESTART IDENTITY
};

// Parses one pgoutput message; `out` is reset first. `in_stream`: the message comes between a
// Stream Start and its Stream Stop (so it carries an xid).
Status ParsePgOutput(std::string_view data, PgOutputMessage* out, bool in_stream = false);

}  // namespace ferry::source::pg
