#include "ferry/sink/sink.h"

#include "ferry/sink/iceberg/iceberg_sink.h"
#include "ferry/sink/mysql/mysql_sink.h"
#include "ferry/sink/postgres/postgres_sink.h"
#include "ferry/sink/redis/redis_sink.h"
#include "ferry/sink/sqlite/sqlite_sink.h"

namespace ferry::sink {

Result<std::unique_ptr<Sink>> Sink::Open(config::DestinationConfig& cfg,
                                         const std::string& pipeline) {
  if (cfg.type == "iceberg") {
    FERRY_ASSIGN_OR_RETURN(auto s, IcebergSink::Open(cfg, pipeline));
    return std::unique_ptr<Sink>(std::move(s));
  }
  if (cfg.type == "postgres" || cfg.type == "postgresql") {
    return OpenPostgresSink(cfg, pipeline);
  }
  if (cfg.type == "mysql" || cfg.type == "mariadb") return OpenMysqlSink(cfg, pipeline);
  if (cfg.type == "sqlite") return OpenSqliteSink(cfg, pipeline);
  if (cfg.type == "redis") return OpenRedisSink(cfg, pipeline);
  return Status::InvalidArgument(
      "destination type '" + cfg.type +
      "' is not known; ferry writes to: iceberg, postgres, mysql (or mariadb), sqlite, redis");
}

}  // namespace ferry::sink
