// The Kafka destination: each table's changes as events in a topic, written in producer
// transactions that also hold the pipeline's checkpoint record, so a `read_committed` consumer
// sees every change exactly once (seed 002: "Kafka transactions; the checkpoint is committed as
// part of the producer transaction"). The client is librdkafka.
//
//   destination:
//     type: kafka
//     brokers: "broker1:9092,broker2:9092"
//     topic: "{pipeline}.{table}"        # the default; also {schema} and {name}
//     format: json                       # the default (the envelope below), or flat
//     deletes: tombstone                 # the default (a delete event, then a tombstone), or event
//     state_topic: ferry.checkpoints     # the default
//     timeout: 60s                       # how long a broker call may take (and transactions)
//     properties:                        # librdkafka settings, passed as they are
//       security.protocol: SASL_SSL
//       sasl.mechanism: SCRAM-SHA-512
//       sasl.username: ferry
//       sasl.password: "${KAFKA_PASSWORD}"
//
// Records. One topic per table, named by `topic` (characters Kafka does not allow become '_';
// two tables meeting in one topic are refused). Key: the table's primary key as a JSON object
// ({"id":5}; no key for a table without one), so a key's events land in one partition (the
// murmur2 partitioner, as Java clients) and keep their order. Value, `format: json` (the shape
// of Debezium's envelope):
//   {"before": null | {key columns}, "after": {columns} | null, "op": "c"|"u"|"d"|"r",
//    "source": {"pipeline", "table", "position" (the log position, or null), "ts_ms", "ts_us"
//               (the source's commit time, or null), "snapshot" (a load's row), "commit" (the
//               id of the producer transaction that wrote the event)},
//    "ts_ms": when ferry wrote it}
// `format: flat`: the row's columns with "__op", "__deleted" and "__commit" (a delete: the key
// columns and "__deleted": true). Values in JSON: events.h. A delete is followed by a tombstone
// (the key, a null value) unless `deletes: event`. State records carry the transaction's id in
// the header `ferry.commit` (events do not: a header costs several allocations a record).
//
// Commits. Each stream has a transactional producer, transactional.id "ferry.<pipeline>.
// <table>": a restarted sync fences its predecessor's producer, and the broker aborts what it
// left open. Rows are produced as they arrive (librdkafka's queue bounds memory) inside a
// transaction begun with the first; Commit flushes them, then produces the checkpoint record
// (key "<pipeline>/<table>", value the marker JSON) to the state topic and commits the
// transaction: events and checkpoint become visible together, or not at all. A load's chunks
// are each a transaction; Publish commits the checkpoint record alone. The marker of a stream is
// read back from the state topic with isolation.level=read_committed (the last record of its
// key; a restart waits for transactions still open there, at most `timeout`). A commit whose
// outcome is unknown (a fatal producer error, sink.commit_outcome_lost) is settled by a new
// producer (whose init completes or aborts the transaction) and the marker read back.
//
// Guarantee: exactly-once for read_committed consumers; read_uncommitted consumers may also see
// events of transactions that were aborted (at-least-once). A full refresh sends every row as an
// "r" event (keys deleted at the source since the last load get no event). Topics are created
// by the brokers' auto-creation or beforehand; the state topic should be compacted.
#pragma once

#include <memory>
#include <string>

#include "ferry/config/config.h"
#include "ferry/sink/sink.h"

namespace ferry::sink {

// Reads the destination keys listed above; every other key is an error naming it.
Result<std::unique_ptr<Sink>> OpenKafkaSink(config::DestinationConfig& cfg,
                                            const std::string& pipeline);

}  // namespace ferry::sink
