// The statements of a MySQL/MariaDB binary log (QUERY events) that a CDC reader must understand
// without a SQL parser: transaction boundaries (BEGIN, COMMIT, ROLLBACK, XA ...) and statements
// that take a followed table's rows or name away (TRUNCATE, DROP TABLE, RENAME TABLE, ALTER TABLE
// ... RENAME, CREATE OR REPLACE TABLE). The statements are as the server logged them: comments,
// backquoted identifiers (`a``b`), string literals and any letter case.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::source {

// One word of a statement: a bare word or number as written, an identifier in backquotes
// (`quoted`, its doubled backquotes undone), or one punctuation character. Comments, string
// literals and white space are left out.
struct SqlToken {
  std::string text;
  bool quoted = false;
  // Whether this is the bare keyword `upper` (given in upper case), in any case.
  bool Is(std::string_view upper) const;
};
std::vector<SqlToken> SqlTokens(std::string_view sql);

// Whether `sql` (run with `database` as the default database) takes the rows or the name of a
// table `followed(db, table)` says is followed, as a sentence ("table shop.orders was
// truncated"; "dropped", "renamed", "replaced"), or empty. Temporary tables are never followed
// tables.
std::string UnfollowableStatement(
    std::string_view sql, const std::string& database,
    const std::function<bool(const std::string& db, const std::string& table)>& followed);

}  // namespace ferry::source
