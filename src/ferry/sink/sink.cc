// The destinations this build writes, by their `type:` name: one line per destination in
// kDestinations. A new destination adds its folder and one line there.
#include "ferry/sink/sink.h"

#include "ferry/sink/iceberg/iceberg_sink.h"
#include "ferry/sink/kafka/kafka_sink.h"
#include "ferry/sink/mysql/mysql_sink.h"
#include "ferry/sink/postgres/postgres_sink.h"
#include "ferry/sink/redis/redis_sink.h"
#include "ferry/sink/sqlite/sqlite_sink.h"

namespace ferry::sink {
namespace {

Result<std::unique_ptr<Sink>> OpenIcebergSink(config::DestinationConfig& cfg,
                                              const std::string& pipeline) {
  FERRY_ASSIGN_OR_RETURN(auto s, IcebergSink::Open(cfg, pipeline));
  return std::unique_ptr<Sink>(std::move(s));
}

struct DestinationType {
  const char* name;
  const char* alias;  // another name for it, or nullptr
  Result<std::unique_ptr<Sink>> (*open)(config::DestinationConfig& cfg,
                                        const std::string& pipeline);
};

constexpr DestinationType kDestinations[] = {
    {"iceberg", nullptr, OpenIcebergSink}, {"postgres", "postgresql", OpenPostgresSink},
    {"mysql", "mariadb", OpenMysqlSink},   {"sqlite", nullptr, OpenSqliteSink},
    {"redis", nullptr, OpenRedisSink},     {"kafka", nullptr, OpenKafkaSink},
};

}  // namespace

Result<std::string> Sink::DescribePartitionTerms(
    const config::DestinationConfig& cfg, const std::string& stream,
    const std::optional<std::vector<std::string>>& terms, const Schema& source_schema) {
  if (!terms) return std::string();
  if (cfg.type != "iceberg") {
    if (terms->empty()) return std::string();
    return NoPartitions(stream, "a " + cfg.type + " destination");
  }
  return IcebergSink::DescribeTerms(stream, *terms, source_schema);
}

Result<std::unique_ptr<Sink>> Sink::Open(config::DestinationConfig& cfg,
                                         const std::string& pipeline) {
  std::string known;
  for (const DestinationType& d : kDestinations) {
    if (cfg.type == d.name || (d.alias != nullptr && cfg.type == d.alias)) {
      return d.open(cfg, pipeline);
    }
    known += (known.empty() ? "" : ", ") + std::string(d.name) +
             (d.alias != nullptr ? std::string(" (or ") + d.alias + ")" : "");
  }
  return Status::InvalidArgument("destination type '" + cfg.type +
                                 "' is not known; ferry writes to: " + known);
}

}  // namespace ferry::sink
