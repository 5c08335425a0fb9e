// The SQLite source: discovery from the schema, full refresh in rowid-range chunks.
//
// Consistency: a sync reads every stream inside one read transaction on one connection, so all
// tables come from one consistent point of the database. In WAL mode writers go on meanwhile; in
// rollback-journal mode writers wait until the sync ends (ferry warns about that). One reader
// feeds several sinks: SQLite returns rows far faster than they are encoded and compressed.
#pragma once

#include <memory>

#include "ferry/source/source.h"

namespace ferry::source {

Result<std::unique_ptr<Source>> OpenSqliteSource(config::SourceConfig& cfg);

}  // namespace ferry::source
