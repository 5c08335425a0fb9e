// The changes of PostgreSQL's logical-replication stream, reduced to what a destination needs:
// for every table and key, the last change since the previous checkpoint (a full row to upsert,
// or a delete). Fed the pgoutput messages in log order; holds a transaction's changes apart until
// its Commit, so that a checkpoint always falls on a transaction boundary and a transaction can be
// dropped whole (when the stream must stop inside it).
//
// Exactly-once bookkeeping: every table has a position (an LSN): a transaction whose commit
// record starts before it is already in that table's destination and is skipped for that table.
//
// Large transactions may come streamed while still in progress (Stream Start/Stop blocks,
// interleaved with other transactions): their changes are held apart per transaction and per
// subtransaction, each folded by key, and move into the held changes at their Stream Commit, in
// the order they were made, without those of subtransactions rolled back (Stream Abort). A
// streamed transaction that aborts leaves nothing. A TRUNCATE inside one is reported at its
// commit, when it is known to count.
//
// A table is one relation (its OID, ChangeTable::relid): a relation message naming a followed
// table with another OID is a table dropped and created again under the name (or an older one
// that had the name): its first change that counts is reported (kRecreated) for the caller to
// decide, and the caller skips that relation, adopts it, or stops before the transaction.
//
// Unchanged TOASTed values ('u': PostgreSQL does not send a large value an UPDATE left alone) are
// filled from the old row image (REPLICA IDENTITY FULL) or from an earlier change of the same key
// since the last checkpoint; what remains is filled at TakeBatches() by the caller's `resolve`
// (it reads the current row by key). Nothing is ever written with a placeholder.
//
// Memory: with a spill store (SetSpill), changes held past `memory_limit` bytes — the open
// transaction's, a streamed transaction's (per subtransaction), or the committed ones' — go to
// sorted run files (source/change_spill.h). Every change carries its arrival number, so the last
// change of a key wins in memory or on disk; a subtransaction rolled back (Stream Abort) or a
// dropped transaction drops its runs; a streamed transaction's runs do not count for tables that
// already hold it. An unchanged TOASTed value whose earlier change is on disk is looked up like
// one never seen (the caller's `resolve` at TakeBatches).
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/clients/postgres/copy_binary.h"
#include "ferry/source/change_spill.h"
#include "ferry/source/postgres/pgoutput.h"
#include "ferry/types/batch.h"

namespace ferry::source::pg {

// The PostgreSQL client's names (PgConnection, the COPY codec, the type map) are this
// namespace's too.
using namespace ferry::pg;

// A table whose changes are followed.
struct ChangeTable {
  std::string stream;  // ferry's stream name
  std::string nspname;
  std::string relname;
  std::vector<std::string> columns;  // in the stream's column order
  // Columns of the table the stream does not read (its transforms leave them out): skipped in
  // every change, whatever their type.
  std::vector<std::string> ignored;
  std::vector<PgWire> wires;             // per column
  std::vector<uint32_t> type_oids;       // per column, as declared (domains included)
  std::vector<size_t> key;               // key columns, in key order
  std::shared_ptr<const Schema> schema;  // batches are built on it (column order as `columns`)
  Lsn position = 0;                      // changes committed before it are skipped
  // The relation whose changes the destination holds; a relation of the same name with another
  // OID is another table (kRecreated). 0: any relation of the name.
  uint32_t relid = 0;
  // Where the destination's rows of `relid` were read: a transaction committed before it that
  // changes another relation of the name is of an older table, and skipped.
  Lsn since = 0;
};

// What the stream did that ferry cannot follow without stopping first.
enum class ChangeEvent {
  kNone,
  kSchemaChanged,  // a relation message has columns (or types) the discovered table lacks:
                   // see schema_change(); rediscover (stop before this transaction) unless
                   // the columns were dropped since (AllowDroppedColumns, then Apply again)
  kTruncated,      // a TRUNCATE of a followed table
  kRecreated,      // a change (or TRUNCATE) of a relation named as a followed table but another
                   // relation than the table's (ChangeTable::relid): see recreated(). The caller
                   // skips the relation (SkipRelation), adopts it (AdoptRelation) and applies the
                   // message again, or stops before this transaction
};

class ChangeSet {
 public:
  explicit ChangeSet(std::vector<ChangeTable> tables);
  // Changes held past `memory_limit` bytes go to `spill` (not owned; it outlives this).
  void SetSpill(ChangeSpill* spill, size_t memory_limit) {
    spill_ = spill;
    memory_limit_ = memory_limit;
  }

  // Applies one message. kNone and OK: go on. Otherwise the caller stops before the current
  // transaction (DropTransaction) — see ChangeEvent. `event_detail` names the table and what
  // changed.
  Status Apply(const PgOutputMessage& m, ChangeEvent* event, std::string* event_detail);
  // Inside a Begin..Commit or a Stream Start..Stop block: no checkpoint can be taken here.
  bool in_transaction() const { return in_txn_ || in_stream_; }
  // Inside a Stream Start..Stop block (its messages carry an xid: see ParsePgOutput).
  bool in_stream() const { return in_stream_; }
  // Streamed transactions whose changes are held apart, waiting for their commit or abort.
  size_t open_streamed() const { return streamed_.size(); }
  // TRUNCATEs are ignored (source.truncate: ignore): a streamed transaction's commit still
  // reports kTruncated, for the log, but its changes are applied.
  void set_ignore_truncate(bool ignore) { ignore_truncate_ = ignore; }

  // What the last kSchemaChanged was about. Columns the discovered table has and a relation
  // message lacks are not a change: the log is older than the catalog (a column added later),
  // and those values are NULL.
  struct Retyped {
    std::string column;
    uint32_t type_oid = 0;  // the relation's (the discovered table's is in ChangeTable)
    int32_t typmod = -1;
  };
  struct SchemaChange {
    uint32_t relid = 0;
    size_t table = 0;                          // an index into tables()
    std::vector<std::string> unknown_columns;  // in the relation, not in the discovered table
    std::vector<Retyped> retyped;              // in both, of another type in the relation
  };
  const SchemaChange& schema_change() const { return schema_change_; }
  // What the last kRecreated was about: the followed table (an index into tables()) and the
  // relation the change is of.
  struct Recreated {
    size_t table = 0;
    uint32_t relid = 0;
  };
  const Recreated& recreated() const { return recreated_; }
  // The relation `relid` is not the followed table of its name (an older table that had the
  // name): its changes are ignored.
  void SkipRelation(uint32_t relid);
  // The followed table `table` is the relation `relid` from here on: its changes are applied.
  void AdoptRelation(size_t table, uint32_t relid);
  // The relation's columns `names` no longer exist on the source (dropped after this point of the
  // log): their values are ignored.
  void AllowDroppedColumns(uint32_t relid, const std::vector<std::string>& names);
  // The relation's column `column` is of type `type_oid` at this point of the log, older than the
  // discovered table's type (an ALTER COLUMN ... TYPE came later): its values arrive as `wire`
  // and are widened to the column's discovered wire form as they come (WidenPgValue; the caller
  // checks PgWireWidens). A relation message of that type is then no schema change.
  void DecodeOlderType(uint32_t relid, const std::string& column, uint32_t type_oid, PgWire wire);
  // The end of the last commit applied (0 before any).
  Lsn last_commit_end() const { return last_commit_end_; }
  // Forgets the open transaction's changes, and those of every streamed transaction not yet
  // committed (the log sends them again from its start on the next read).
  void DropTransaction();

  // Keys held since the last TakeBatches (on disk: changes, a key may count more than once), and
  // an estimate of their bytes in memory and on disk.
  size_t pending_changes() const { return pending_changes_; }
  size_t pending_bytes() const { return pending_bytes_; }

  // Hands out every held change as batches of at most `batch_rows` rows: emit(table, batch,
  // deletes), each row's origin (kind of change, commit time, commit LSN) in batch.origins().
  // Values are decoded here; a value the Iceberg type cannot hold is an error naming the table and
  // column. Clears what was held. Changes read back from spill files that still lack an unchanged
  // TOASTed value are filled by `resolve(table, keys, rows)`: for each key (key order, binary send
  // format) the table's current row (binary values in column order), or nullopt when it no longer
  // exists (the change becomes a delete). At most kResolveKeys keys of one table per call.
  using Row = std::optional<std::vector<std::optional<std::string>>>;
  using Resolver = std::function<Status(
      size_t table, const std::vector<std::vector<std::string>>& keys, std::vector<Row>* rows)>;
  static constexpr size_t kResolveKeys = 500;
  Status TakeBatches(size_t batch_rows,
                     const std::function<bool(size_t table, Batch& batch, bool deletes)>& emit,
                     const Resolver& resolve = nullptr);

  const std::vector<ChangeTable>& tables() const { return tables_; }

 private:
  struct Value {
    char kind = 'n';  // 'n', 'u' (still unknown), 'b'/'t'
    std::string bytes;
  };
  struct Change {
    bool deleted = false;
    uint64_t seq = 0;  // arrival order (merges a streamed transaction's subxacts)
    // Its kind, and its transaction's commit time and position (a streamed transaction's are
    // set at its commit: in memory then, through run_commits_ for its runs on disk).
    RowOrigin origin;
    // Stream column order; a delete's are the row's old values (REPLICA IDENTITY FULL), or its
    // key columns only.
    std::vector<Value> values;
  };
  using Changes = std::unordered_map<std::string, Change>;

  // A transaction streamed while in progress: per (sub)transaction xid, per table, by key.
  struct StreamedTxn {
    std::map<uint32_t, std::vector<Changes>> subs;
    std::map<uint32_t, size_t> sub_bytes;       // per subtransaction: its changes in memory
    std::map<uint32_t, std::vector<int>> runs;  // per subtransaction: its spill files
    std::vector<bool> truncated;                // per table
  };

  struct Relation {
    size_t table = 0;
    std::vector<int> to_column;  // relation column -> stream column, -1: ignored
    // Per relation column: the older wire form its values arrive in (DecodeOlderType), if any.
    std::vector<std::optional<PgWire>> older_wire;
    uint32_t relid = 0;
    std::vector<RelationColumn> columns;  // as the relation message gave them
    bool checked = false;                 // compared with the table's columns (CheckRelation)
  };
  struct OlderType {
    std::string column;
    uint32_t type_oid = 0;
    PgWire wire = PgWire::kText;
  };

  Status OnRelation(const PgOutputMessage& m, ChangeEvent* event, std::string* detail);
  // Maps the relation's columns onto the table's; kSchemaChanged when they differ (see
  // ChangeEvent). Checked: the same, for a relation not compared yet (adopted since).
  Status CheckRelation(Relation* rel, ChangeEvent* event, std::string* detail);
  Status Checked(uint32_t relid, ChangeEvent* event, std::string* detail);
  Status OnRow(const PgOutputMessage& m);
  // A change of `relid` that counts, when the relation is not its table's: reports kRecreated.
  // True when the change must wait for the caller's decision; false to go on (`*skip`: ignore it).
  bool Foreign(uint32_t relid, bool* skip, ChangeEvent* event, std::string* detail);
  Status OnStreamCommit(const PgOutputMessage& m, ChangeEvent* event, std::string* detail);
  // Moves one transaction's changes of table t into the held ones.
  void Hold(size_t t, Changes& txn);
  // Where a row change of (sub)transaction `xid` goes: the open transaction, or the streamed one.
  std::vector<Changes>& Target(uint32_t xid);
  // Key id of `values` (stream column order); false when a key column is NULL or missing.
  bool KeyOf(size_t table, const std::vector<Value>& values, std::string* id) const;
  Result<std::vector<Value>> ToColumns(const Relation& rel, const std::vector<TupleValue>& tuple,
                                       const char* what) const;
  Status Put(std::vector<Changes>& target, size_t table, std::string key, Change c);
  static size_t BytesOf(const std::string& key, const Change& c) {
    size_t n = key.size() + 96;
    for (const auto& v : c.values) n += v.bytes.size() + sizeof(Value);
    return n;
  }
  // Spill: a group of maps (held, the open transaction, a streamed subtransaction) written as one
  // run and emptied; the largest group spilled while memory is past the limit.
  Result<int> SpillMaps(std::vector<Changes>* maps);
  Status MaybeSpill();
  // The row of a held change as a spill record, and back.
  static std::string Encode(const Change& c);
  static Status Decode(std::string_view record, uint64_t seq, Change* c);
  // Appends a held change (resolved) to its table's batches.
  Status Append(size_t t, const Change& change, Batch* upserts, Batch* deletes);
  void Recount() {
    pending_changes_ = held_changes_ + spilled_changes_;
    pending_bytes_ = held_bytes_ + spilled_bytes_;
  }
  // The latest change of the key before this one: in the open (or streamed) transaction, else
  // held since the last checkpoint.
  const Change* Find(size_t table, const std::string& key) const;

  std::vector<ChangeTable> tables_;
  std::map<uint32_t, Relation> relations_;  // by relation oid, from relation messages
  std::vector<Changes> held_;               // per table: since the last TakeBatches
  std::vector<Changes> txn_;                // per table: the open transaction
  std::vector<bool> skip_;                  // per table: the open transaction is already there
  bool in_txn_ = false;
  Lsn txn_lsn_ = 0;  // the open transaction's commit position (its Begin's final LSN)
  int64_t txn_time_ = RowOrigin::kNoTime;  // and its commit time
  // Runs of streamed transactions, written before their commit was known: its time and position.
  std::map<int, RowOrigin> run_commits_;
  std::unordered_map<uint32_t, StreamedTxn> streamed_;  // by top-level xid
  bool in_stream_ = false;
  uint32_t stream_xid_ = 0;  // the transaction of the open stream block
  uint64_t seq_ = 0;
  bool ignore_truncate_ = false;
  Lsn last_commit_end_ = 0;
  size_t pending_changes_ = 0;
  size_t pending_bytes_ = 0;
  // In memory: held changes, the open transaction's, and every streamed one's (sum of
  // sub_bytes); on disk: held runs.
  size_t held_changes_ = 0, held_bytes_ = 0, txn_bytes_ = 0, streamed_bytes_ = 0;
  size_t spilled_changes_ = 0, spilled_bytes_ = 0;
  ChangeSpill* spill_ = nullptr;
  size_t memory_limit_ = 0;
  std::vector<int> held_runs_;                          // runs of held changes
  std::vector<int> txn_runs_;                           // runs of the open transaction
  std::map<int, std::pair<size_t, size_t>> run_sizes_;  // per run: changes, bytes on disk
  uint32_t current_sub_ = 0;  // the (sub)transaction of the streamed change being put
  void DropRun(int run);
  void JoinHeld(int run);  // a run's changes join the held ones
  // A transaction committed: its `runs` join the held ones, ranked above everything held before
  // (arrival order is not commit order for streamed transactions); `skip`: per table, its
  // entries do not count.
  Status JoinCommitted(std::vector<int>* runs, const std::vector<bool>* skip);
  uint64_t commits_ = 0;  // transactions committed: the rank of the runs that join at a commit
  // Per run: the tables whose entries in it do not count (they held its transaction already).
  std::map<int, std::vector<bool>> skipped_;
  SchemaChange schema_change_;
  Recreated recreated_;
  std::set<uint32_t> skipped_relids_;                       // SkipRelation
  std::map<uint32_t, std::vector<std::string>> dropped_;    // by relation oid
  std::map<uint32_t, std::vector<OlderType>> older_types_;  // by relation oid
};

}  // namespace ferry::source::pg
