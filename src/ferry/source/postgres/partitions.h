// A PostgreSQL table's identity as a stream's progress records it, and how the partitions of a
// partitioned table can change under a followed stream without one change in the log: ATTACH
// PARTITION of a table that holds rows (the rows were never inserted into the partitioned table),
// DETACH PARTITION or DROP of a partition (its rows leave without deletes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/status.h"

namespace ferry::pg {
class PgConnection;
}  // namespace ferry::pg

namespace ferry::source::pg {

using ferry::pg::PgConnection;

// StreamInfo::table_id of a PostgreSQL table: its relation OID in decimal, and for a partitioned
// table "/" and the OIDs of its leaf partitions, ascending and comma-separated
// ("16384/16390,16395"; "16384/" without partitions). Recorded with what the destination holds, it
// says whose rows those are: a table dropped and created again has another OID, a partitioned table
// whose partitions changed another list.
struct TableIdentity {
  uint32_t relid = 0;
  // The leaves are listed (false for a table that is not partitioned, and for records of older
  // ferry, which named the OID alone: their partitions are taken to be the table's now).
  bool partitioned = false;
  std::vector<uint32_t> leaves;  // ascending

  std::string ToString() const;
  static Result<TableIdentity> Parse(std::string_view text);
  bool operator==(const TableIdentity&) const = default;
};

// The leaf partitions of the partitioned table `root` now, ascending.
Result<std::vector<uint32_t>> LeafPartitions(PgConnection* conn, uint32_t root);

// What a destination holding the rows of `held`'s partitions lacks or has too many of, now that
// the partitioned table (`display`, e.g. "public.m") is made of `now`'s: partitions that left it
// (detached or dropped: their rows stay in the destination), and partitions that joined holding
// rows written before they joined (ATTACH PARTITION of a table with rows: the log never carries
// them). Empty when nothing is missing or extra: every partition that joined since holds only rows
// written after it joined (CREATE TABLE ... PARTITION OF, then inserts), whose changes are in the
// log. Reads each joined partition until it finds an older row (one scan of a new partition).
Result<std::string> PartitionsDiverge(PgConnection* conn, const std::string& display,
                                      const TableIdentity& held, const TableIdentity& now);

}  // namespace ferry::source::pg
