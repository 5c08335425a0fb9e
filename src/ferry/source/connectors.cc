// The sources this build reads, by their `type:` name: one line per source.
#include "ferry/source/mysql/mysql_source.h"
#include "ferry/source/postgres/postgres_source.h"
#include "ferry/source/source.h"
#include "ferry/source/sqlite/sqlite_source.h"

namespace ferry::source {

const std::vector<SourceType>& SourceTypes() {
  static const std::vector<SourceType> kTypes = {
      {"sqlite", OpenSqliteSource},
      {"postgres", OpenPostgresSource},
      {"mysql", OpenMysqlSource},
  };
  return kTypes;
}

}  // namespace ferry::source
