#include "ferry/clients/mysql/binlog_stream.h"

#include <mysql.h>

#include <mariadb_rpl.h>

#include <algorithm>

namespace ferry::mysql {

Result<uint32_t> BinlogFileNumber(std::string_view file) {
  const size_t dot = file.rfind('.');
  const std::string_view digits = dot == std::string_view::npos ? "" : file.substr(dot + 1);
  uint64_t n = 0;
  bool ok = !digits.empty() && digits.size() <= 10;
  for (char c : digits) {
    ok = ok && c >= '0' && c <= '9';
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!ok || n > 0xffffffffu) {
    return Status::InvalidArgument("binary log file name '" + std::string(file) +
                                   "' does not end in a number");
  }
  return static_cast<uint32_t>(n);
}

Result<std::unique_ptr<BinlogStream>> BinlogStream::Open(const ConnectParams& params,
                                                         const BinlogDump& dump) {
  auto s = std::unique_ptr<BinlogStream>(new BinlogStream());
  s->dump_ = dump;
  ConnectParams p = params;
  // Three heartbeats missed: the connection is lost.
  p.read_timeout_s = std::max(5, dump.heartbeat_ms * 3 / 1000);
  p.denied_fix =
      "the binary log reader needs REPLICATION SLAVE (GRANT REPLICATION SLAVE, "
      "REPLICATION CLIENT ON *.* TO '" +
      p.user + "'@'%')";
  FERRY_ASSIGN_OR_RETURN(s->conn_, Connection::Connect(p));
  Connection& c = *s->conn_;
  // The server sends events with their checksums when the reader says it can check them.
  FERRY_RETURN_IF_ERROR(c.Exec("SET @master_binlog_checksum = @@global.binlog_checksum",
                               "preparing the binary log dump"));
  if (c.flavor().mariadb) {
    // MariaDB 10+ events (GTIDs, annotations) as they are, not rewritten for old replicas.
    FERRY_RETURN_IF_ERROR(
        c.Exec("SET @mariadb_slave_capability = 4", "preparing the binary log dump"));
  }
  const int64_t heartbeat_ns = static_cast<int64_t>(std::max(1, dump.heartbeat_ms)) * 1000000;
  FERRY_RETURN_IF_ERROR(c.Exec("SET @master_heartbeat_period = " + std::to_string(heartbeat_ns),
                               "preparing the binary log dump"));

  s->rpl_ = mariadb_rpl_init(c.mysql_);
  if (s->rpl_ == nullptr) return Status::Unavailable("cannot set up a binary log dump");
  mariadb_rpl_optionsv(s->rpl_, MARIADB_RPL_FILENAME, dump.file.c_str(), dump.file.size());
  mariadb_rpl_optionsv(s->rpl_, MARIADB_RPL_START, static_cast<unsigned long>(dump.offset));
  mariadb_rpl_optionsv(s->rpl_, MARIADB_RPL_SERVER_ID, static_cast<unsigned int>(dump.server_id));
  mariadb_rpl_optionsv(
      s->rpl_, MARIADB_RPL_FLAGS,
      static_cast<unsigned int>(dump.until_end ? MARIADB_RPL_BINLOG_DUMP_NON_BLOCK : 0));
  if (mariadb_rpl_open(s->rpl_) != 0) {
    return s->Failed("starting the binary log dump at " + dump.file + ":" +
                     std::to_string(dump.offset));
  }
  return s;
}

BinlogStream::~BinlogStream() {
  if (event_ != nullptr) mariadb_free_rpl_event(event_);
  if (rpl_ != nullptr) mariadb_rpl_close(rpl_);
}

Status BinlogStream::Failed(const std::string& what) {
  const unsigned code = mysql_errno(conn_->mysql_);
  if (code == 1236) {
    // ER_MASTER_FATAL_ERROR_READING_BINLOG: the file is gone (purged), or the position is not
    // in it.
    return Status::NotFound(
        what + ": the server no longer has the binary log there (" +
        conn_->Clean(mysql_error(conn_->mysql_)) +
        "): the changes since were purged (expire_logs_days, binlog_expire_logs_seconds, PURGE "
        "BINARY LOGS) before ferry read them. A new backfill loads the tables again: remove the "
        "streams' entries from the state file (ferry state), then sync; keep binary logs longer "
        "than the time between syncs");
  }
  if (code == 0) {
    return Status::IOError(what + ": " +
                           (rpl_ != nullptr ? std::string(mariadb_rpl_error(rpl_)) : "failed"));
  }
  return conn_->Error(what);
}

Result<std::optional<std::string_view>> BinlogStream::Next() {
  // Each event is fetched into a new one: after a failed fetch, the library leaves an event
  // handed in half released, which neither a reuse nor a release survives.
  if (event_ != nullptr) {
    mariadb_free_rpl_event(event_);
    event_ = nullptr;
  }
  MARIADB_RPL_EVENT* e = mariadb_rpl_fetch(rpl_, nullptr);
  if (e == nullptr) {
    if (mysql_errno(conn_->mysql_) == 0 && dump_.until_end) {
      return std::optional<std::string_view>();
    }
    return Failed("reading the binary log");
  }
  event_ = e;
  // The packet as received: its first byte is the protocol's OK marker, then the event.
  if (e->raw_data_ofs > e->raw_data_size) return Status::Corruption("a binary log packet is short");
  return std::optional<std::string_view>(
      std::string_view(reinterpret_cast<const char*>(e->raw_data) + e->raw_data_ofs,
                       e->raw_data_size - e->raw_data_ofs));
}

std::string BinlogStream::Describe() const { return conn_->ServerName() + " at " + conn_->Where(); }

}  // namespace ferry::mysql
