// The commit protocol of destinations whose commit is ONE database transaction holding the rows
// and the pipeline's checkpoint row (PostgreSQL, MySQL/MariaDB), written once. A destination's
// stream derives from TransactionalStream and supplies only its statements (the hooks below);
// the steps, their order, the fault points and the totals are here.
//
// A commit (Commit, and Transact for a destination's Publish):
//   [sink.data_written]                      (Commit only)
//   BEGIN                                    Begin()
//   read the checkpoint row, locked          LockedMarker(): a second writer of the same
//                                            pipeline and table waits, then sees this marker
//   marker shows the work landed?            ROLLBACK, CommitResult{already_landed = true}
//   the work                                 ApplyChanges() for changes; Publish's statements
//   write the checkpoint row                 SetMarker()
//   [before fault point]                     sink.before_commit / sink.before_publish
//   COMMIT                                   SendCommit(); sink.commit_outcome_lost sends it and
//                                            cuts the connection, so its answer is lost
//   [after fault point]                      sink.after_commit / sink.after_publish
// A COMMIT whose outcome is unknown (OutcomeUnknown(): the connection died during it) is settled
// on a new connection (Reconnect()) by reading the checkpoint row back (ReadMarker()): when the
// marker shows it landed, the commit succeeded and its rows count in the totals like those of
// any commit; otherwise kUnavailable, and the engine's retry checks the marker first. Any other
// failure rolls the transaction back and is returned with the table named.
//
// Thread-safety: as SinkStream. The hooks are called on the stream's thread; Interrupt (from
// another thread) is the destination's own.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/sink/sink.h"

namespace ferry::sink {

class TransactionalStream : public SinkStream {
 public:
  const std::shared_ptr<const Schema>& schema() const override { return schema_; }
  Json Marker() const override { return marker_; }
  uint64_t pending_rows() const override { return pending_.rows; }
  bool HasPending() const override { return pending_.rows > 0 || pending_.deletes > 0; }
  // A marker alone is one row update.
  bool CheapMarkerCommits() const override { return true; }
  Totals totals() const override { return totals_; }

  // The protocol above with ApplyChanges() as the work of a commit to the live table (`load`
  // empty); a load's rows are in its load table already.
  Result<CommitResult> Commit(const std::string& load, const Json& marker,
                              const std::map<std::string, std::string>& summary,
                              const MarkerCheck& already_landed) override;

 protected:
  // `table_text`: the table as messages name it ("public.orders"); `schema`: the stream's;
  // `marker`: the checkpoint row's when the stream was opened.
  TransactionalStream(std::string table_text, std::shared_ptr<const Schema> schema, Json marker);

  // What was written since the last commit; the destination counts what it writes into it.
  struct Pending {
    uint64_t rows = 0;     // rows of a load and upserts
    uint64_t upserts = 0;  // of those, upserts (staged changes)
    uint64_t deletes = 0;  // keys staged for deletion
    uint64_t bytes = 0;    // bytes sent for them
  };

  // One transaction of the protocol: Begin ... COMMIT, with `work` between the locked marker
  // read and the marker write. `before`, `after`: the fault points around COMMIT (nullptr: none);
  // `what`: "publishing the load of" (for messages, followed by the table).
  Result<CommitResult> Transact(const Json& marker, const MarkerCheck& already_landed,
                                const std::function<Status()>& work, const char* before,
                                const char* after, std::string_view what);

  // Ends the open transaction (if any) without committing, and forgets what was pending.
  void Rollback() {
    RollbackTransaction();
    pending_ = Pending();
  }

  const std::string& table_text() const { return table_text_; }

  const std::shared_ptr<const Schema> schema_;
  const std::vector<size_t> all_;   // every column's position: 0, 1, ...
  const std::vector<size_t> keys_;  // the key columns' positions, in key order
  Pending pending_;

  // ---- what the destination supplies ----

  // Checked by Commit before its transaction: kInternal when `load` is not the one written.
  virtual Status CheckCommitLoad(const std::string& load) const {
    (void)load;
    return Status::OK();
  }
  // Opens the transaction; nothing when one is open.
  virtual Status Begin() = 0;
  // Inside the transaction: the checkpoint row's marker (null when none), locked until it ends.
  virtual Result<Json> LockedMarker() = 0;
  // Inside the transaction: the staged changes applied to the live table.
  virtual Status ApplyChanges() = 0;
  // Inside the transaction: the checkpoint row written with `marker`.
  virtual Status SetMarker(const Json& marker) = 0;
  // COMMIT; the transaction is over whatever the outcome. `cut`: send it and cut the connection
  // without reading the answer.
  virtual Status SendCommit(bool cut) = 0;
  // Whether `commit_error` (from SendCommit) leaves the outcome unknown: the connection is lost.
  virtual bool OutcomeUnknown(const Status& commit_error) const = 0;
  // A new connection in place of the lost one.
  virtual Status Reconnect() = 0;
  // The checkpoint row's marker, read without a lock (null when none).
  virtual Result<Json> ReadMarker() = 0;
  // ROLLBACK of the open transaction, if any.
  virtual void RollbackTransaction() = 0;

 private:
  // COMMIT, settled when its outcome is unknown; counts the totals of a commit that landed.
  Status CommitOrSettle(const MarkerCheck& already_landed);

  const std::string table_text_;
  const Json marker_;
  Totals totals_;
};

// The marker a checkpoint row holds as JSON text (nullopt: no row, or NULL): null when none;
// kCorruption naming `table` when the text is not JSON.
Result<Json> ParseCheckpointMarker(std::optional<std::string_view> text, const std::string& table);

}  // namespace ferry::sink
