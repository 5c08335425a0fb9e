// The PostgreSQL source: discovery from the catalogs, full refresh read with COPY (FORMAT binary)
// in ctid block ranges, decoded straight into columnar batches.
//
// Streams: a table of schema `public` is named by its table name ("orders"), a table of any other
// schema by "schema.table"; the pipeline may also write "public.orders". Views and materialized
// views are streams too; partitions are read through their partitioned parent.
//
// Consistency: a sync reads every stream inside one REPEATABLE READ READ ONLY transaction on one
// connection, so all tables come from one consistent point of the database (the snapshot is
// exported, for parallel readers to come). Writers go on meanwhile.
#pragma once

#include <memory>

#include "ferry/source/source.h"

namespace ferry::source {

Result<std::unique_ptr<Source>> OpenPostgresSource(config::SourceConfig& cfg);

}  // namespace ferry::source
