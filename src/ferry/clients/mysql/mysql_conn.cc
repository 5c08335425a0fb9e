#include "ferry/clients/mysql/mysql_conn.h"

#include <errmsg.h>
#include <mysql.h>

#include <sys/socket.h>

#include <mutex>

namespace ferry::mysql {
namespace {

// The session every statement of the destination runs in (see the header).
constexpr const char* kSessionSetup =
    "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO', "
    "time_zone = '+00:00', autocommit = 1, net_write_timeout = 3600, net_read_timeout = 3600";

void InitLibrary() {
  static std::once_flag once;
  std::call_once(once, [] { mysql_library_init(0, nullptr, nullptr); });
}

bool IsLost(unsigned code) {
  switch (code) {
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case CR_SERVER_LOST_EXTENDED:
    case CR_ERR_NET_READ:
    case CR_ERR_NET_WRITE:
    case 1053:  // ER_SERVER_SHUTDOWN
    case 1927:  // ER_CONNECTION_KILLED
    case 4031:  // ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8)
      return true;
    default:
      return false;
  }
}

StatusCode CodeOf(unsigned code) {
  if (IsLost(code)) return StatusCode::kUnavailable;
  switch (code) {
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_UNKNOWN_HOST:
    case 1040:  // ER_CON_COUNT_ERROR: too many connections
      return StatusCode::kUnavailable;
    case 1044:  // ER_DBACCESS_DENIED_ERROR
    case 1045:  // ER_ACCESS_DENIED_ERROR
    case 1130:  // ER_HOST_NOT_PRIVILEGED
    case 1142:  // ER_TABLEACCESS_DENIED_ERROR
    case 1143:  // ER_COLUMNACCESS_DENIED_ERROR
    case 1227:  // ER_SPECIFIC_ACCESS_DENIED_ERROR
    case 1370:  // ER_PROCACCESS_DENIED_ERROR
    case 1698:  // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
      return StatusCode::kPermissionDenied;
    case 1205:  // ER_LOCK_WAIT_TIMEOUT
    case 1213:  // ER_LOCK_DEADLOCK
      return StatusCode::kCommitFailed;
    case 1049:  // ER_BAD_DB_ERROR
    case 1146:  // ER_NO_SUCH_TABLE
      return StatusCode::kNotFound;
    case 1048:  // ER_BAD_NULL_ERROR
    case 1059:  // ER_TOO_LONG_IDENT
    case 1060:  // ER_DUP_FIELDNAME
    case 1062:  // ER_DUP_ENTRY
    case 1071:  // ER_TOO_LONG_KEY
    case 1103:  // ER_WRONG_TABLE_NAME
    case 1166:  // ER_WRONG_COLUMN_NAME
    case 1264:  // ER_WARN_DATA_OUT_OF_RANGE
    case 1265:  // WARN_DATA_TRUNCATED
    case 1292:  // ER_TRUNCATED_WRONG_VALUE
    case 1366:  // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD
    case 1367:  // ER_ILLEGAL_VALUE_FOR_TYPE
    case 1406:  // ER_DATA_TOO_LONG
    case 1690:  // ER_DATA_OUT_OF_RANGE
    case 3140:  // ER_INVALID_JSON_TEXT (MySQL)
    case 3819:  // ER_CHECK_CONSTRAINT_VIOLATED (MySQL)
    case 4025:  // ER_CONSTRAINT_FAILED (MariaDB)
      return StatusCode::kInvalidArgument;
    default:
      return StatusCode::kIOError;
  }
}

std::string Prefixed(std::string_view what, const std::string& message) {
  if (what.empty()) return message;
  return std::string(what) + ": " + message;
}

}  // namespace

Result<std::unique_ptr<Connection>> Connection::Connect(const ConnectParams& p) {
  InitLibrary();
  auto c = std::unique_ptr<Connection>(new Connection(p));
  c->mysql_ = mysql_init(nullptr);
  if (c->mysql_ == nullptr) return Status::Unavailable("cannot allocate a MySQL connection");
  unsigned timeout = static_cast<unsigned>(p.connect_timeout_s);
  mysql_optionsv(c->mysql_, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
  if (p.read_timeout_s > 0) {
    const unsigned read_timeout = static_cast<unsigned>(p.read_timeout_s);
    mysql_optionsv(c->mysql_, MYSQL_OPT_READ_TIMEOUT, &read_timeout);
  }
  mysql_optionsv(c->mysql_, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  const unsigned protocol = MYSQL_PROTOCOL_TCP;
  mysql_optionsv(c->mysql_, MYSQL_OPT_PROTOCOL, &protocol);
  const std::string where = "the MySQL/MariaDB server at " + c->Where();
  if (mysql_real_connect(c->mysql_, p.host.c_str(), p.user.c_str(), p.password.c_str(),
                         p.database.empty() ? nullptr : p.database.c_str(),
                         static_cast<unsigned>(p.port), nullptr, CLIENT_FOUND_ROWS) == nullptr) {
    const unsigned code = mysql_errno(c->mysql_);
    const std::string m =
        c->Clean(mysql_error(c->mysql_)) + " [error " + std::to_string(code) + "]";
    const StatusCode sc = CodeOf(code);
    if (sc == StatusCode::kPermissionDenied) {
      return Status::PermissionDenied("cannot log in to " + where + " as user '" + p.user + "': " +
                                      m + "; check " + p.setting + ".user and " + p.setting +
                                      ".password (or the url; e.g. password: ${MYSQL_PASSWORD}), "
                                      "and that the user may log in from this host (CREATE USER '" +
                                      p.user + "'@'%' IDENTIFIED BY '...')");
    }
    if (sc == StatusCode::kNotFound) {
      return Status::NotFound("cannot open database '" + p.database + "' on " + where + ": " + m +
                              "; check " + p.setting + ".database (or the url's /database)");
    }
    return Status::Unavailable("cannot connect to " + where + ": " + m + "; check " + p.setting +
                               ".host and " + p.setting +
                               ".port (or the url), and that the server runs and accepts TCP "
                               "connections from here (bind-address)");
  }
  c->server_info_ = mysql_get_server_info(c->mysql_);
  c->thread_id_ = mysql_thread_id(c->mysql_);
  c->flavor_ = ParseServerInfo(c->server_info_);
  FERRY_RETURN_IF_ERROR(c->Exec(kSessionSetup, "setting up the session"));
  FERRY_ASSIGN_OR_RETURN(Rows r, c->Query("SELECT @@max_allowed_packet", "reading settings"));
  if (!r.empty() && r[0].size() == 1 && r[0][0]) {
    c->max_allowed_packet_ = std::strtoll(r[0][0]->c_str(), nullptr, 10);
  }
  return c;
}

Connection::~Connection() {
  if (mysql_ != nullptr) mysql_close(mysql_);
}

std::string Connection::Clean(std::string text) const {
  const std::string& pw = params_.password;
  if (pw.empty()) return text;
  for (size_t at = text.find(pw); at != std::string::npos; at = text.find(pw, at + 3)) {
    text.replace(at, pw.size(), "***");
  }
  return text;
}

Status Connection::Error(std::string_view what) {
  const unsigned code = mysql_errno(mysql_);
  if (IsLost(code)) lost_ = true;
  std::string m = Clean(mysql_error(mysql_));
  const char* state = mysql_sqlstate(mysql_);
  m += " [" + std::string(flavor_.mariadb ? "MariaDB" : "MySQL") + " error " +
       std::to_string(code) + (state && *state ? std::string(", SQLSTATE ") + state : "") + "]";
  last_error_ = m;
  if (code == 1153) {  // ER_NET_PACKET_TOO_LARGE
    m += "; raise the server's max_allowed_packet (SET GLOBAL max_allowed_packet = 1073741824)";
  }
  StatusCode sc = CodeOf(code);
  if (sc == StatusCode::kPermissionDenied && !params_.denied_fix.empty()) {
    m += "; " + params_.denied_fix;
  } else if (sc == StatusCode::kPermissionDenied) {
    m += "; give user '" + params_.user +
         "' the privileges ferry needs on the destination database and the state_database "
         "(GRANT ALL PRIVILEGES ON `<database>`.* TO '" +
         params_.user + "')";
  }
  return Status(sc, Prefixed(what, m));
}

Status Connection::Exec(const std::string& sql, std::string_view what) {
  if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) return Error(what);
  if (mysql_field_count(mysql_) > 0) {
    MYSQL_RES* res = mysql_store_result(mysql_);
    if (res == nullptr) return Error(what);
    mysql_free_result(res);
  }
  return Status::OK();
}

Status Connection::SendAndCut(const std::string& sql) {
  if (mysql_send_query(mysql_, sql.data(), sql.size()) != 0) return Error("sending " + sql);
  ::shutdown(mysql_get_socket(mysql_), SHUT_RDWR);
  lost_ = true;
  return Status::Unavailable("the connection was cut after sending " + sql + " (fault injected)");
}

Result<Rows> Connection::Query(const std::string& sql, std::string_view what) {
  if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) return Error(what);
  Rows rows;
  if (mysql_field_count(mysql_) == 0) return rows;
  MYSQL_RES* res = mysql_store_result(mysql_);
  if (res == nullptr) return Error(what);
  const unsigned n = mysql_num_fields(res);
  while (MYSQL_ROW r = mysql_fetch_row(res)) {
    unsigned long* lengths = mysql_fetch_lengths(res);
    Row row(n);
    for (unsigned i = 0; i < n; ++i) {
      if (r[i] != nullptr) row[i] = std::string(r[i], lengths[i]);
    }
    rows.push_back(std::move(row));
  }
  mysql_free_result(res);
  return rows;
}

Status Connection::Stream(const std::string& sql, const std::function<Status(const RowView&)>& each,
                          std::string_view what) {
  if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) return Error(what);
  if (mysql_field_count(mysql_) == 0) return Status::OK();
  MYSQL_RES* res = mysql_use_result(mysql_);
  if (res == nullptr) return Error(what);
  const unsigned n = mysql_num_fields(res);
  RowView view(n);
  Status st;
  while (MYSQL_ROW r = mysql_fetch_row(res)) {
    unsigned long* lengths = mysql_fetch_lengths(res);
    for (unsigned i = 0; i < n; ++i) {
      view[i] = r[i] == nullptr
                    ? std::nullopt
                    : std::optional<std::string_view>(std::string_view(r[i], lengths[i]));
    }
    st = each(view);
    if (!st.ok()) break;
  }
  if (st.ok() && mysql_errno(mysql_) != 0) st = Error(what);
  mysql_free_result(res);  // reads (and drops) what the server still sends
  return st;
}

std::string Connection::Literal(std::string_view text) {
  std::string out = "'";
  AppendEscaped(text, &out);
  out += '\'';
  return out;
}

void Connection::AppendEscaped(std::string_view text, std::string* out) {
  const size_t at = out->size();
  out->resize(at + text.size() * 2 + 1);
  unsigned long n = mysql_real_escape_string(mysql_, out->data() + at, text.data(), text.size());
  out->resize(at + n);
}

std::string Connection::ServerName() const {
  const int v = flavor_.version;
  return std::string(flavor_.mariadb ? "MariaDB " : "MySQL ") + std::to_string(v / 10000) + "." +
         std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::string Connection::Where() const {
  const bool v6 = params_.host.find(':') != std::string::npos;
  return (v6 ? "[" + params_.host + "]" : params_.host) + ":" + std::to_string(params_.port);
}

}  // namespace ferry::mysql
