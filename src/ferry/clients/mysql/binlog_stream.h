// A dump of a MySQL/MariaDB server's binary log, as a replica receives it (COM_BINLOG_DUMP), on a
// connection of its own: the events one at a time, whole and undecoded (source/mysql decodes
// them). The library (MariaDB Connector/C's replication API) is used for the protocol only —
// login, TLS, framing; its own row decoding is not trustworthy and is not used.
//
// The session announces the checksums it accepts (the server's binlog_checksum, so events keep
// their CRC32 and the reader verifies it) and MariaDB's GTID capability, and asks for heartbeats:
// a quiet server sends one every `heartbeat_ms`, so a reader following the log regains control
// (and learns the log's position) while nothing is written, and a connection silent for longer
// than a few heartbeats is taken as lost (kUnavailable, retried by the engine).
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ferry/base/status.h"
#include "ferry/clients/mysql/mysql_conn.h"

struct st_mariadb_rpl;
struct st_mariadb_rpl_event;

namespace ferry::mysql {

// The number of a binary log file ("binlog.000003" -> 3): what orders the files. kInvalidArgument
// for a name without a numeric extension.
Result<uint32_t> BinlogFileNumber(std::string_view file);

struct BinlogDump {
  std::string file;     // the binary log file to start in ("binlog.000003")
  uint64_t offset = 4;  // the event to start at (4: the file's first)
  // The id this reader takes among the server's replicas: two readers of one server must not
  // share one (the server drops the older dump).
  uint32_t server_id = 0;
  int heartbeat_ms = 1000;
  // Ask the server to end the dump at the log's end (BINLOG_DUMP_NON_BLOCK): Next() then gives
  // nullopt. Otherwise the dump waits for new events.
  bool until_end = false;
};

class BinlogStream {
 public:
  // Connects (`params`, with a read timeout of a few heartbeats), prepares the session and starts
  // the dump. kNotFound when the file is no longer on the server (purged), naming the fix;
  // kPermissionDenied without REPLICATION SLAVE; kUnavailable when the server cannot be reached.
  static Result<std::unique_ptr<BinlogStream>> Open(const ConnectParams& params,
                                                    const BinlogDump& dump);
  ~BinlogStream();
  BinlogStream(const BinlogStream&) = delete;
  BinlogStream& operator=(const BinlogStream&) = delete;

  // The next event, whole (19-byte header, body, checksum), valid until the next call; nullopt
  // at the log's end when the dump was asked to end there. A lost connection is kUnavailable.
  Result<std::optional<std::string_view>> Next();

  // "MariaDB 10.11.6 at 127.0.0.1:3306"
  std::string Describe() const;

 private:
  BinlogStream() = default;
  Status Failed(const std::string& what);

  std::unique_ptr<Connection> conn_;
  BinlogDump dump_;
  st_mariadb_rpl* rpl_ = nullptr;
  st_mariadb_rpl_event* event_ = nullptr;
};

}  // namespace ferry::mysql
