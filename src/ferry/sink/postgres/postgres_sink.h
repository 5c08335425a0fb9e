// The PostgreSQL destination: every commit is ONE transaction on the target holding the rows and
// the pipeline's checkpoint row, so both land or neither does (seed 001, "Exactly-once delivery").
//
//   destination:
//     type: postgres
//     dsn: "host=... dbname=... user=... password=${PGPASSWORD}"
//     schema: public            # where the tables go (created when missing)
//     state_schema: ferry_state # where the checkpoint rows go
//
// Tables are named after their streams and created from the source schema (docs/type-mapping.md,
// "PostgreSQL destination"); key columns become the primary key.
//
// Loads (full refresh, CDC backfill) are COPYed in binary into a load table in the state schema,
// one transaction per chunk with the checkpoint row; publishing adds the primary key and swaps
// the load table in place of the target in one transaction, so readers see the old rows or the
// new ones, never half a load. Changes are COPYed into temporary staging tables and applied
// set-based (INSERT ... ON CONFLICT DO UPDATE, DELETE ... USING) in the transaction that moves
// the checkpoint. The commit protocol is sink/transactional.h's: a COMMIT whose outcome is unknown
// (the connection died during it) is settled by reading the checkpoint row back on a new
// connection.
//
// Schema changes of a stream that is not replacing its table: added columns are added, and
// columns widen in place by the rule of every destination (types/type_change.h; see pg_evolve.h
// for smallint, numeric and character varying columns); anything else stops with the column and
// the fix.
#pragma once

#include <memory>
#include <string>

#include "ferry/config/config.h"
#include "ferry/sink/sink.h"

namespace ferry::sink {

Result<std::unique_ptr<Sink>> OpenPostgresSink(config::DestinationConfig& cfg,
                                               const std::string& pipeline);

}  // namespace ferry::sink
