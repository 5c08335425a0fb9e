// A thin RAII layer over one libpq connection: connect with errors that name the fix (never the
// password), parameterised queries with text results, and COPY ... TO STDOUT streaming.
//
// Secrets: the DSN is never echoed. Messages from libpq and the server are scrubbed of the DSN's
// password and passed through config::Redact before they reach a Status.
// Thread-safety: one thread at a time (libpq's rule for a PGconn).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/status.h"

struct pg_conn;
struct pg_cancel;
struct pg_result;

namespace ferry::pg {

// How a connection is opened and named in errors.
struct PgConnectOptions {
  // A logical-replication (walsender) session on the DSN's database, which takes replication
  // commands and simple-protocol SQL only (Query with parameters and QueryBinary are refused by
  // the server there; use SimpleQuery).
  bool replication = false;
  // Where the DSN comes from, as errors name it ("source.dsn", "destination.dsn").
  std::string_view setting = "source.dsn";
  // The session's application_name unless the DSN sets one (what pg_stat_activity shows).
  std::string_view application = "ferry";
  // When set, connection errors name the server as this followed by its URI ("the catalog
  // database postgresql://ferry@db:5432/lake"); else as "PostgreSQL (host=... port=...)".
  std::string_view role;
};

// "name" -> "\"name\"", doubling embedded quotes: safe for any identifier.
std::string QuoteIdent(std::string_view name);

class PgResult {
 public:
  PgResult() = default;
  explicit PgResult(pg_result* r);
  int rows() const;
  int cols() const;
  // Rows a command inserted, updated or deleted (0 for others).
  int64_t AffectedRows() const;
  bool IsNull(int row, int col) const;
  std::string Text(int row, int col) const;
  int64_t Int64(int row, int col) const;  // 0 for NULL or non-numbers
  double Double(int row, int col) const;
  bool Bool(int row, int col) const;  // 't' is true
  // The value's bytes as sent (binary results: the type's send format).
  std::string_view Bytes(int row, int col) const;

 private:
  std::shared_ptr<pg_result> r_;
};

class PgConnection {
 public:
  // Connects with a libpq connection string or URI. Adds client_encoding=UTF8, TCP keepalives
  // (a dead server is noticed within about a minute instead of waited on) and, unless the DSN
  // sets them, connect_timeout=10 and application_name. The session then pins TimeZone UTC,
  // DateStyle ISO and extra_float_digits 3, so that values printed as text (cursor values, views
  // computing text) are unambiguous and exact whatever the server's or role's defaults. Errors:
  //   kInvalidArgument  the DSN does not parse;
  //   kPermissionDenied authentication failed;
  //   kNotFound         the database or role does not exist;
  //   kUnavailable      the server cannot be reached (retryable).
  static Result<std::unique_ptr<PgConnection>> Connect(const std::string& dsn,
                                                       const PgConnectOptions& options = {});
  // "postgresql://user@host:port/database" from a DSN, without its password: how the server may
  // be named before (or without) a connection. kInvalidArgument when the DSN does not parse.
  static Result<std::string> DsnUri(const std::string& dsn, std::string_view setting);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs `sql` with text parameters ($1, $2, ...; nullopt = NULL) and text results.
  Result<PgResult> Query(const std::string& sql,
                         const std::vector<std::optional<std::string>>& params = {});
  Status Exec(const std::string& sql);
  // The simple query protocol: one statement, no parameters (replication sessions).
  Result<PgResult> SimpleQuery(const std::string& sql);
  // Parameters in their types' binary send format (types inferred by the server), results in
  // binary: values travel exactly as COPY binary and pgoutput's binary mode carry them.
  Result<PgResult> QueryBinary(const std::string& sql,
                               const std::vector<std::optional<std::string>>& params);

  // Streaming replication (CopyBoth), for a replication session: `sql` is START_REPLICATION.
  Status StartCopyBoth(const std::string& sql);
  // The next CopyData message into `out`: 1 = a message, 0 = none within `timeout_ms`,
  // -1 = the server ended the stream (its error, if any, is the Status).
  Result<int> ReadCopyData(std::string* out, int timeout_ms);
  Status PutCopyData(std::string_view data);
  // Sends `sql` and cuts the connection before the answer arrives (fault injection: a COMMIT
  // whose outcome the client cannot know). The connection is unusable afterwards.
  Status SendAndCut(const std::string& sql);
  int ServerVersion() const;
  // Whether the connection is still up (false once the server or the network dropped it).
  bool connected() const;
  // The SQLSTATE of the last statement that failed ("23505"; empty when the server sent none).
  const std::string& last_sqlstate() const { return last_sqlstate_; }
  // `value` as a quoted SQL string literal (PQescapeLiteral: quotes and backslashes escaped for
  // this connection's encoding and settings), for statements that take no parameters (COPY).
  Result<std::string> Literal(std::string_view value) const;

  // Runs a COPY ... FROM STDIN sending `data` (the whole stream, e.g. COPY binary with its
  // header and trailer), and waits for the server's verdict.
  Status CopyIn(const std::string& sql, std::string_view data);
  // Runs a COPY ... TO STDOUT and hands each CopyData message to `on_data`. If `on_data` fails,
  // the COPY is cancelled on the server, the connection drained, and that status returned.
  Status CopyOut(const std::string& sql, const std::function<Status(std::string_view)>& on_data);

  // "PostgreSQL 15.18 at 127.0.0.1:5432, database shop, user ferry" (no secrets).
  std::string Describe() const;
  std::string User() const;
  // Asks the server to cancel the statement this connection is running (PQcancel), from any
  // thread: the statement then fails with kCancelled. A request that arrives between statements
  // may cancel the next one instead: after Cancel, the caller gives up on the connection's
  // current work (a timed-out checkpoint is abandoned whole).
  void Cancel() const;

 private:
  PgConnection(pg_conn* conn, std::string password) : conn_(conn), password_(std::move(password)) {}
  std::string Clean(std::string message) const;
  Status ErrorOf(pg_result* r, const std::string& what) const;
  Status ConnectionError(const std::string& what) const;

  pg_conn* conn_;
  pg_cancel* cancel_ = nullptr;  // made when connected: PQgetCancel is not for other threads
  std::string password_;         // only to scrub messages
  mutable std::string last_sqlstate_;
};

}  // namespace ferry::pg
