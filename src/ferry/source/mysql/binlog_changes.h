// The changes of a MySQL/MariaDB binary log, reduced to what a destination needs: for every
// followed table and key, the last change since the previous checkpoint (a full row to upsert, or
// a delete). Fed the decoded row images of one transaction at a time; a transaction's changes are
// held apart until its commit, so that a checkpoint always falls on a transaction boundary and a
// transaction the read must stop inside is dropped whole (the log sends it again next time).
//
// Exactly-once bookkeeping: every table has a position (where its destination's changes end): a
// transaction that ends at or before it is already in that table's destination and is skipped for
// that table.
//
// Values are kept as the text the snapshot reads (binlog_events.h) and converted by
// AppendMysqlValue when the batches are taken: a change and a snapshot row convert alike. Those
// the decoder gives in binary form (numbers, dates and times) are kept so and appended by
// AppendMysqlBinary, which converts and refuses as AppendMysqlValue does their text.
//
// An UPDATE that changes a row's key is a delete of the old key and an upsert of the new one.
//
// Memory: with a spill store (SetSpill), changes held past `memory_limit` bytes — the open
// transaction's or the committed ones' — go to sorted run files (source/change_spill.h); every
// change carries its arrival number, so the last change of a key wins whether it is in memory or
// on disk, a dropped transaction's runs are dropped, and a transaction's runs of tables that
// already hold it do not count. TakeBatches then reads them back merged, in key order.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/source/change_spill.h"
#include "ferry/source/mysql/mysql_types.h"
#include "ferry/source/position.h"
#include "ferry/types/batch.h"

namespace ferry::source {

struct BinlogTable {
  std::string stream;                    // ferry's stream name
  std::string display;                   // `db`.`table`, for messages
  std::vector<std::string> columns;      // stream column order
  std::vector<MysqlWire> wires;          // per column
  std::vector<size_t> key;               // key columns, in key order
  std::shared_ptr<const Schema> schema;  // batches are built on it (column order as `columns`)
  Position position;                     // transactions ending at or before it are skipped
};

class BinlogChanges {
 public:
  explicit BinlogChanges(std::vector<BinlogTable> tables);
  // Changes held past `memory_limit` bytes go to `spill` (not owned; it outlives this).
  void SetSpill(ChangeSpill* spill, size_t memory_limit) {
    spill_ = spill;
    memory_limit_ = memory_limit;
  }

  // A row of table `t` in stream column order (nullopt: NULL). `deleted`: the row is gone (its
  // key columns are what counts). Goes into the open transaction. kInvalidArgument when a key
  // column is NULL (a table without a usable key cannot be followed).
  Status Put(size_t t, bool deleted, const std::vector<std::optional<std::string_view>>& row) {
    return Put(t, deleted ? RowOrigin::Op::kDelete : RowOrigin::Op::kInsert, row);
  }
  // The same, of an insert, an update's new row or a delete (the kind of change the row's
  // origin says: see TakeBatches). `typed` (per stream column, when given): the values that are
  // in ferry's binary form (mysql_types.h, AppendMysqlBinary) rather than text; never a key's.
  Status Put(size_t t, RowOrigin::Op op, const std::vector<std::optional<std::string_view>>& row,
             const std::vector<bool>* typed = nullptr);
  // An UPDATE: `before` and `after` images in stream column order (`typed` as for Put). When
  // the row moved to another key (both images have a whole key and they differ) the old row is
  // deleted, with the image `whole_before` gives when set: `before` may then hold the key alone.
  Status Update(size_t t, const std::vector<std::optional<std::string_view>>& before,
                const std::vector<std::optional<std::string_view>>& after,
                const std::vector<bool>* typed = nullptr,
                const std::function<Result<const std::vector<std::optional<std::string_view>>*>()>&
                    whole_before = {});
  // The open transaction ended at `end` (the event after its XID or COMMIT), logged at
  // `commit_us` (microseconds since the epoch): its changes of every table whose position is
  // before `end` are held; the rest are already in their tables.
  void Commit(Position end, int64_t commit_us = RowOrigin::kNoTime);
  // Forgets the open transaction's changes.
  void DropTransaction();
  // Whether table t's changes in a transaction ending at `end` count (end is after its position).
  bool Counts(size_t t, Position end) const { return end > tables_[t].position; }

  // Keys held since the last TakeBatches (on disk and in the open transaction: changes, a key
  // may count more than once), and an estimate of their bytes, in memory and on disk.
  size_t pending_changes() const { return pending_changes_; }
  size_t pending_bytes() const { return pending_bytes_; }

  // Hands out every held change as batches of at most `batch_rows` rows: emit(table, batch,
  // deletes), each row's origin (kind of change, its transaction's commit time and end) in
  // batch.origins(). A value that does not convert exactly is an error naming the table, column and
  // key. Clears what was held.
  Status TakeBatches(size_t batch_rows,
                     const std::function<bool(size_t table, Batch& batch, bool deletes)>& emit);

  const std::vector<BinlogTable>& tables() const { return tables_; }

 private:
  // A row packed in one string (one allocation per change, whatever the columns): per column
  // in stream column order, a 4-byte length (kNull: NULL; kTyped set: the value is in binary
  // form) and the value's bytes.
  struct Change {
    bool deleted = false;
    uint64_t seq = 0;  // arrival order: the later change of a key wins, in memory or on disk
    RowOrigin origin;  // its kind; its transaction's commit time and end, set at the commit
    std::string packed;
  };
  // The open transaction's changes of a table in arrival order, key and change: no lookup per
  // change (Commit folds them into the held ones, the later change of a key last). A key changed
  // many times in one transaction is held once per change until the commit (or the spill, whose
  // merge keeps the last). A deque: no reallocation, so memory is what the changes take.
  using TxnChanges = std::deque<std::pair<std::string, Change>>;
  // The held changes of a table: a key once, in the order keys first came (TakeBatches reads
  // them in that order, one block after another), found by an open-addressing index of their
  // positions. Iterates as key and change pairs (ChangeSpill::WriteMaps).
  class Held {
   public:
    size_t size() const { return entries_.size(); }
    bool empty() const { return entries_.empty(); }
    TxnChanges::const_iterator begin() const { return entries_.begin(); }
    TxnChanges::const_iterator end() const { return entries_.end(); }
    // The entry of `key`; a new one (its change default) when *inserted.
    std::pair<std::string, Change>& Upsert(std::string&& key, bool* inserted);

   private:
    void Grow();
    TxnChanges entries_;
    // Per slot: the key's 32-bit hash, then its position in entries_ + 1 (0: free); at most
    // half full. A probe reads an entry's key only when the hashes agree.
    std::vector<uint64_t> slots_;
  };
  static constexpr uint32_t kNull = 0xffffffffu;
  static constexpr uint32_t kTyped = 0x80000000u;
  // What a held change takes, for the max_bytes policy: its key, row and the map's node.
  static size_t BytesOf(const std::string& key, const Change& c) {
    return key.size() + c.packed.size() + 96;
  }

  // Whether an UPDATE moved its row to another key (Update).
  bool KeyMoved(size_t t, const std::vector<std::optional<std::string_view>>& before,
                const std::vector<std::optional<std::string_view>>& after);
  // The key id of `row`; false when a key column is NULL.
  bool KeyOf(size_t t, const std::vector<std::optional<std::string_view>>& row,
             std::string* id) const;

  std::vector<BinlogTable> tables_;
  std::string old_key_, new_key_;  // KeyMoved's
  // Writes `maps` (per table) as one run and empties them; returns its id.
  template <typename Map>
  Result<int> SpillMaps(std::vector<Map>* maps);
  // Spills the larger of the open transaction's and the held changes while memory is past the
  // limit.
  Status MaybeSpill();
  // Appends a held change to the batches of its table.
  Status Append(size_t t, const RowOrigin& origin, std::string_view packed, Batch* upserts,
                Batch* deletes);
  // Runs of transactions written before their commit: its time and end (Commit).
  std::map<int, RowOrigin> run_commits_;

  std::vector<Held> held_;       // per table: since the last TakeBatches
  std::vector<TxnChanges> txn_;  // per table: the open transaction
  ChangeSpill* spill_ = nullptr;
  size_t memory_limit_ = 0;
  uint64_t seq_ = 0;
  std::vector<int> held_runs_;  // runs of held changes
  std::vector<int> txn_runs_;   // runs of the open transaction
  // Per run: the tables whose entries in it do not count (they held its transaction already).
  std::map<int, std::vector<bool>> skipped_;
  size_t spilled_changes_ = 0, spilled_bytes_ = 0;          // held runs
  size_t txn_spilled_changes_ = 0, txn_spilled_bytes_ = 0;  // the open transaction's runs
  // Kept as changes come and go (never recounted: a transaction's commit costs its own changes).
  size_t held_changes_ = 0, held_bytes_ = 0;
  size_t txn_changes_ = 0, txn_bytes_ = 0;
  size_t pending_changes_ = 0;
  size_t pending_bytes_ = 0;
  void Recount() {
    pending_changes_ = held_changes_ + txn_changes_ + spilled_changes_ + txn_spilled_changes_;
    pending_bytes_ = held_bytes_ + txn_bytes_ + spilled_bytes_ + txn_spilled_bytes_;
  }
};

}  // namespace ferry::source
