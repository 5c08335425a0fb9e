// The SQLite destination: every commit is ONE SQLite transaction holding the rows and the
// pipeline's checkpoint row, so both land or neither does (seed 001, "Exactly-once delivery").
//
//   destination:
//     type: sqlite
//     path: replica.db   # relative to the pipeline file's folder; created when missing
//
// Tables are named exactly as their streams ("orders", "sales.orders", "Odd ""name"" ü" are all
// one quoted identifier; SQLite ignores the letter case of ASCII names, so two streams or columns
// differing only in case are refused); key columns become the PRIMARY KEY. A table that exists
// without a ferry_state row of this pipeline is not ferry's: it is never written or replaced.
// Beside the tables, ferry keeps
//   ferry_state(pipeline, split, marker, columns, updated_at)  PRIMARY KEY (pipeline, split):
//     split is the stream, marker the engine's checkpoint (JSON), columns the table's ferry
//     schema (JSON: name, type, required, key), because SQLite's declared types are loose;
//   ferry_loads(pipeline, split, run, table_name, columns): load tables of full refreshes in
//     flight, "ferry_load_<16 hex digits>".
//
// Type mapping (declared type; stored value):
//   boolean                 INTEGER  0 / 1
//   int, long               INTEGER
//   float, double           REAL     except NaN: TEXT 'NaN' (SQLite would store NULL) and -0.0:
//                                    BLOB '-0.0' (a REAL column keeps no negative zero, and REAL
//                                    affinity turns the text '-0.0' into 0.0); ±Infinity as REAL
//   decimal(p,s)            TEXT     the exact decimal, s fraction digits: '12.30', '-0.0001'
//   date                    TEXT     'YYYY-MM-DD'; years outside 0000..9999 signed: '+10000-01-01',
//                                    '-0044-03-15' (ISO 8601 expanded, astronomical years)
//   time                    TEXT     'HH:MM:SS.ffffff'
//   timestamp               TEXT     'YYYY-MM-DD HH:MM:SS.ffffff'
//   timestamptz             TEXT     'YYYY-MM-DD HH:MM:SS.ffffff+00:00' (UTC)
//   string                  TEXT     UTF-8, any byte including NUL
//   binary                  BLOB
//   uuid                    TEXT     lowercase canonical form
//   list<T>                 TEXT     a JSON array: booleans and numbers as JSON (NaN, Infinity,
//                                    -Infinity as strings), binary as base64 strings, every other
//                                    element as a string in the form above; NULL elements as null
// Text-stored types are declared TEXT so that SQLite's affinity never converts them; the dates
// and timestamps are read by SQLite's date functions. Required columns are NOT NULL.
//
// Concurrency: each stream has its own connection (WAL journal, busy timeout 60 s). Rows are
// staged in TEMP tables of that connection (temp_store=FILE, so memory stays bounded) and
// applied set-based by Commit in one `BEGIN IMMEDIATE` transaction with the checkpoint row, so
// no stream holds the database's write lock between commits.
//
// Loads (full refresh, CDC backfill) go to a load table per run, created by StartLoad (or the
// run's first commit), which also drops the tables older runs left; a resumed run keeps its table
// (and is refused if the source's columns changed meanwhile: its committed chunks would not fit).
// Publish drops the target and renames the load table in its place, in one transaction (with the
// checkpoint). The user's indexes and triggers on the target are created again on the
// new table (those that no longer apply are skipped with a warning).
//
// Schema changes of a stream that is not replacing its table: added columns are added
// (nullable), int->long, float->double and decimal precision widen in place, NOT NULL is relaxed
// when the source's column becomes nullable or disappears (columns the source no longer has stay,
// NULL in new rows); anything else is refused, naming the column and the fix. A table ferry
// created that has no rows and no checkpoint yet is simply created again for the new schema.
#pragma once

#include <memory>
#include <string>

#include "ferry/config/config.h"
#include "ferry/sink/sink.h"

namespace ferry::sink {

// Reads the destination key `path`; every other key is an error naming it.
Result<std::unique_ptr<Sink>> OpenSqliteSink(config::DestinationConfig& cfg,
                                             const std::string& pipeline);

}  // namespace ferry::sink
