// The Redis destination: every commit is ONE MULTI/EXEC transaction holding the rows and the
// pipeline's checkpoint key, so both land or neither does (seed 001, "Exactly-once delivery";
// stronger than the seed's "effectively-once" for Redis, because the checkpoint is in the same
// transaction as the rows).
//
//   destination:
//     type: redis
//     url: "redis://:${REDIS_PASSWORD}@127.0.0.1:6379/0"  # [[user]:password@]host[:port][/db]
//     prefix: ferry                                      # the default
//
// One Redis server (a primary): not Redis Cluster, not TLS (rediss://), not Unix sockets. Redis
// 6.2 or newer (SMISMEMBER). The password never appears in messages or logs.
//
// Keys (a key "part" below has ':' and '\' escaped by '\', so a part never contains a bare ':'):
//   <prefix>:<stream part>:<row key>      a hash per row: column name -> the value's text form;
//                                         NULL columns are absent. <row key> is the key column's
//                                         text form as is, or for a composite key the columns'
//                                         text forms, each escaped as a part, joined by ':'.
//   <prefix>:ferry_state:<pipeline part>:<stream part>   the checkpoint (the engine's marker JSON)
//   <prefix>:ferry_schema:<stream part>   the table's ferry columns, JSON
//                                         {"pipeline", "key": [names], "columns": [{name, type,
//                                         required, key, element_required}]}; written with every
//                                         commit; names the pipeline that owns the table (another
//                                         pipeline's table is refused) and is what readers
//                                         (`ferry verify`) parse values by.
//   <prefix>:ferry_load:<pipeline part>:<stream part>:<run part>  a set: the row keys a load in
//                                         flight has written;
//   <prefix>:ferry_loads:<pipeline part>:<stream part>   a set: the runs that have such a set.
// Streams named ferry_state, ferry_schema, ferry_load or ferry_loads are refused. Every key
// under <prefix>:<stream part>: is ferry's: a full refresh deletes those it did not write.
//
// Text forms of values (TypeKind -> field value):
//   boolean               "true" / "false"
//   int, long             decimal digits, "-" for negatives
//   float, double         the shortest decimal that reads back as the same float or double
//                         ("0.1", "1e+16", "-0"); "NaN", "Infinity", "-Infinity"
//   decimal(p,s)          the exact decimal with s fraction digits: "12.30", "-0.0001"
//   date                  "YYYY-MM-DD" ("+10000-01-01", "-0044-03-15" outside 0000..9999)
//   time                  "HH:MM:SS.ffffff"
//   timestamp             "YYYY-MM-DD HH:MM:SS.ffffff"
//   timestamptz           "YYYY-MM-DD HH:MM:SS.ffffff+00:00" (UTC)
//   string                the UTF-8 bytes; binary: the bytes as they are (Redis strings are
//                         binary-safe)
//   uuid                  lowercase canonical form
//   list<T>               a JSON array: booleans and numbers as JSON (NaN, Infinity, -Infinity as
//                         strings), binary as base64 strings, other elements as strings in the
//                         forms above; NULL elements as null (the SQLite destination's form)
//
// Commits. Rows are buffered client-side, RESP-encoded, until the commit (the engine's checkpoint
// bounds them): a row write is DEL + HSET of the whole row (a full-row replacement: a replayed
// write leaves the same end state), a delete is DEL; deletes go before upserts. Commit pipelines
// WATCH <checkpoint>, GET <checkpoint>; when the marker shows the work landed, UNWATCH and drop the
// buffer; else MULTI, the buffered commands, SET <checkpoint>, SET <schema> (queued), then EXEC.
// EXEC answering nil (the checkpoint key changed since WATCH: another writer) reads the marker
// again and decides (3 tries, then kCommitFailed). A connection lost during EXEC leaves the
// outcome unknown: a new connection reads the checkpoint key back and the marker check decides
// (landed: done; not landed: kUnavailable, and the retried commit checks the marker first); the
// fault point sink.commit_outcome_lost makes this happen (EXEC sent, the connection cut). A
// transaction whose commands fail at queue time is discarded whole (EXECABORT); Redis does not
// roll back a command failing inside EXEC, which DEL-before-HSET rules out for rows (no
// WRONGTYPE); any such failure is reported as an error naming the command.
//
// Loads (full refresh, CDC backfill). Redis has no tables to swap: a load's rows are written in
// place as full-row replacements, each chunk's commit also adding the written keys to the run's
// load set. Publish SCANs <prefix>:<stream part>:* and deletes the keys not in the load set
// (SMISMEMBER, 1000 keys a round trip), then in one MULTI/EXEC deletes the set and sets the
// marker. So during a load readers see rows replaced in place (old and new rows mixed), and rows
// deleted at the source disappear at publish. A crash during Publish leaves the marker
// unpublished; the next sync publishes again (idempotent). StartLoad drops the sets of older runs
// of the same pipeline and stream. A load needs a key: a table without a primary key is refused
// (set the stream's primary_key). Memory: the load set holds every row key of the table until
// publish.
//
// Schema changes: hashes need no DDL. A stream that does not replace its table may add columns
// and widen int->long, float->double and a decimal's precision (types/type_change.h, the rule of
// every destination); other type changes (a narrower type too) and a changed key are refused with
// the fix (a full refresh, or deleting the table's keys). Columns the source dropped stay in the
// record (older rows keep them).
//
// Readers (`ferry verify`): SCAN the table's keys (deduplicated: SCAN may return a key twice),
// HGETALL them pipelined, parse by the schema record; a field that does not parse is kCorruption
// naming the key and field; fields the record does not list are ignored.
//
// Durability is Redis's: with neither RDB nor AOF persistence a restart of Redis loses rows and
// checkpoints together. A maxmemory-policy that evicts keys without a TTL (allkeys-*) can lose
// them one by one; ferry warns when it sees one (use noeviction).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ferry/config/config.h"
#include "ferry/sink/sink.h"

namespace ferry::sink {

// Reads the destination keys `url` and `prefix`; every other key is an error naming it.
Result<std::unique_ptr<Sink>> OpenRedisSink(config::DestinationConfig& cfg,
                                            const std::string& pipeline);

namespace redis {

// ---- exposed for tests ----

// Appends the text form (above) of row `row` of `col`, which holds a value (not NULL).
Status AppendValueText(const Column& col, size_t row, std::string* out);
// Appends the value `text` stands for to `col` (of the type it is read as); an error's message
// says why the text is not such a value.
Status AppendFromValueText(std::string_view text, Column* col);
// `s` as a key part: ':' -> "\:", '\' -> "\\".
std::string EscapeKeyPart(std::string_view s);
// `s` matching only itself in a SCAN MATCH pattern: '*', '?', '[', ']', '\' escaped by '\'.
std::string EscapeGlob(std::string_view s);

}  // namespace redis
}  // namespace ferry::sink
