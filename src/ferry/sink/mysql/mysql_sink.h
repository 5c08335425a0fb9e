// The MySQL / MariaDB destination: every commit is ONE InnoDB transaction on the target holding
// the rows and the pipeline's checkpoint row, so both land or neither does (seed 001,
// "Exactly-once delivery").
//
//   destination:
//     type: mysql                   # or mariadb
//     host: db.example.com
//     port: 3306                    # the default
//     user: ferry
//     password: ${MYSQL_PASSWORD}
//     database: shop                # where the tables go (created when missing)
//     state_database: ferry_state   # where ferry's own tables go (the default)
//   or, instead of host/port/user/password/database:
//     url: mysql://ferry:${MYSQL_PASSWORD}@db.example.com:3306/shop
//
// The user needs ALL PRIVILEGES on both databases (CREATE, ALTER, DROP, INSERT, UPDATE, DELETE,
// SELECT, INDEX, CREATE TEMPORARY TABLES), and CREATE on *.* only when a database is missing.
// Connections are TCP, utf8mb4, sql_mode STRICT_ALL_TABLES (see mysql_conn.h), time_zone +00:00.
//
// Tables are named exactly as their streams (`shop`.`Odd ``Name```: any name of at most 64
// characters that does not end with a space); key columns become the PRIMARY KEY; InnoDB.
//
// Type mapping (ferry -> declared type):
//   boolean        BOOLEAN (TINYINT(1))
//   int            INT
//   long           BIGINT
//   float          FLOAT
//   double         DOUBLE          NaN and ±Infinity cannot be stored: the sync stops, naming the
//                                  column and row (MySQL has no such values)
//   decimal(p,s)   DECIMAL(p,s)
//   date           DATE            years 1000..9999 (the documented range); others stop the sync
//   time           TIME(6)
//   timestamp      DATETIME(6)     years 1000..9999
//   timestamptz    DATETIME(6)     the UTC time, column comment 'ferry:timestamptz' (TIMESTAMP
//                                  would only hold 1970..2038)
//   string         LONGTEXT        utf8mb4, collation utf8mb4_nopad_bin (MariaDB) or
//                                  utf8mb4_0900_bin (MySQL 8): compared byte by byte, trailing
//                                  spaces count, as in the source
//     as a key     VARCHAR(n)      n = 768 for a key of one text column; a key's columns share
//                                  InnoDB's 3072 key bytes (VARCHAR(383) + VARCHAR(383) + ...);
//                                  a longer value stops the sync
//   binary         LONGBLOB
//     as a key     VARBINARY(n)    n = 3072 alone, shared as above
//   uuid           CHAR(36)        ascii_bin, lowercase canonical text, comment 'ferry:uuid'
//                                  (MariaDB's UUID type refuses values whose variant bits are not
//                                  RFC 4122's; a source's uuid may hold any 128 bits)
//   list<T>        JSON            a JSON array (MariaDB: LONGTEXT with a JSON_VALID check),
//                                  comment 'ferry:list<T>'; elements as the SQLite destination
//                                  writes them (numbers as numbers, other values as ISO text)
// Required columns are NOT NULL. The comments let `ferry verify` read the types back exactly.
//
// Beside the tables, ferry keeps in state_database:
//   checkpoints(pipeline, split, marker, updated_at)   PRIMARY KEY (pipeline, split): the marker
//     (JSON) of each table, read FOR UPDATE and upserted inside every commit; the row is created
//     (marker JSON null) when the stream is opened, so commits lock a row, never a gap (gap locks
//     of streams committing their first rows at once would deadlock);
//   loads(pipeline, split, run, load_table, created_at): load tables of full refreshes in flight;
//   load_<16 hex digits>: a load's rows (FNV-1a 64 of pipeline, stream and run), until Publish;
//   old_<16 hex digits>: the replaced table, between the swap and its DROP.
//
// Changes (incremental windows, CDC) are inserted, in statements of about 1 MiB, into TEMPORARY
// staging tables inside the commit's transaction, and applied set-based (DELETE ... JOIN,
// INSERT ... SELECT ... ON DUPLICATE KEY UPDATE) in that same transaction, which also upserts the
// checkpoint row. A COMMIT whose outcome is unknown (the connection died during it; fault point
// sink.commit_outcome_lost) is settled by reading the checkpoint row back on a new connection
// (the protocol of sink/transactional.h).
// Deleted keys the table cannot hold (too long, out of range) are skipped: no row has them.
//
// Loads (full refresh, CDC backfill) are inserted into the load table (created with its primary
// key and the comment 'ferry load <run>'), one transaction per chunk with the checkpoint row.
// MySQL commits implicitly at every DDL statement (RENAME, DROP, ALTER), so the table swap and
// the marker cannot share a transaction: the swap is one atomic RENAME TABLE, and the comment the
// table carries into place tells a later Publish that the swap already happened; see Publish in
// mysql_sink.cc for the protocol. The target keeps that comment until the next full refresh.
//
// Schema changes of a stream that is not replacing its table: added columns are added
// (nullable), int->long, float->double and decimal precision widen in place (types/type_change.h,
// the rule of every destination; a narrower source type is refused), NOT NULL is dropped
// when the source's column becomes nullable or disappears; anything else stops the sync naming
// the table, the column, both types and the fix.
#pragma once

#include <memory>
#include <string>

#include "ferry/config/config.h"
#include "ferry/sink/sink.h"

namespace ferry::sink {

// Reads the destination keys listed above; every other key is an error naming it.
Result<std::unique_ptr<Sink>> OpenMysqlSink(config::DestinationConfig& cfg,
                                            const std::string& pipeline);

}  // namespace ferry::sink
