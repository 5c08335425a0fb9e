// Progress of a full refresh, as kept in the state file and in the destination's marker, and
// the recovery decision that compares the two (the exactly-once rule, DESIGN.md section 1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/base/status.h"
#include "ferry/engine/window.h"
#include "ferry/source/source.h"

namespace ferry::engine {

using Json = nlohmann::json;
using source::Position;

// A set of chunk indices kept as sorted, disjoint half-open intervals: chunks mostly commit in
// order, so a load of thousands of chunks stays a handful of numbers in the marker.
class IndexSet {
 public:
  void Add(int64_t i);
  bool Contains(int64_t i) const;
  void Merge(const IndexSet& o);
  int64_t Count() const;
  bool operator==(const IndexSet& o) const { return ranges_ == o.ranges_; }
  Json ToJson() const;
  static Result<IndexSet> FromJson(const Json& j);

 private:
  void AddRange(int64_t lo, int64_t hi);
  std::vector<std::pair<int64_t, int64_t>> ranges_;
};

struct FullRefreshProgress {
  std::string run;  // the load's id; a new full refresh gets a new run
  source::ChunkPlan plan;
  IndexSet committed;      // chunk indices whose rows are committed
  int64_t rows = 0;        // rows committed by this run
  bool published = false;  // the load replaced the table's main
  std::string stream;
  // CDC backfill: the change-log position of the snapshot the load started from; changes after
  // it are applied once the load is published.
  std::optional<Position> cdc_start;
  // The source's id of the table the load reads (StreamInfo::table_id; empty when the source has
  // none): a load is never resumed on another table, nor a backfill's changes taken from one.
  std::string table_id;
  // CDC backfill: where in the change log the load's first snapshot stands
  // (Source::SnapshotLogPosition); none when not known.
  Position table_since;

  bool AllCommitted() const { return committed.Count() >= plan.count; }

  Json ToJson() const;  // the marker form
  // `kind`: the source's kind of change-log position (Source::position_kind), as the record's
  // positions are read.
  static Result<FullRefreshProgress> FromJson(const Json& j, const std::string& origin,
                                              Position::Kind kind);
};

enum class Action {
  kStartNewRun,       // nothing in flight: plan a new load
  kResume,            // a load is in flight: continue with the chunks not yet committed
  kAlreadyPublished,  // the load finished in the destination; only the state was behind
};

struct Decision {
  Action action = Action::kStartNewRun;
  FullRefreshProgress progress;  // for kResume / kAlreadyPublished: merged state and marker
  bool state_behind = false;     // the marker showed work the state did not: state needs repair
  std::string explanation;       // for logs and `ferry state`
};

// `state` is the stream's state object (or null); `marker` the table's marker (or null).
// Corrupt contents are an error, never guessed around. `kind` as FullRefreshProgress::FromJson.
Result<Decision> DecideFullRefresh(const Json& state, const Json& marker, Position::Kind kind);

// Progress of an incremental stream (engine/window.h says how a window reads). A window starts at
// the last committed value `from` (its ties re-read) and ends at the largest value above it, or
// at `from` again; its id is derived from the stream, `from` and the digest of the ties committed
// at `from` only, so a restart recognises a window that already landed.
struct IncrementalProgress {
  std::string stream;
  std::string cursor_column;
  Json cursor;  // state: the end of the last committed window (null: nothing yet)
  // The rows committed at `cursor`; nullopt when not known (a record of an older ferry): the next
  // window then writes every row at `cursor` again.
  std::optional<CursorTies> ties;
  std::string window;  // marker: the id of the window this commit completed
  Json from;           // marker: where that window started
  // Rows of the stream's were committed into its table (so the table has a marker): a table
  // without one then was dropped or emptied, not merely never written.
  bool landed = false;

  static std::string WindowId(const std::string& stream, const Json& from,
                              const std::optional<CursorTies>& ties) {
    return stream + "@" + from.dump() + (ties ? "#" + ties->Digest() : "");
  }
  Json ToJson() const;
  static Result<IncrementalProgress> FromJson(const Json& j, const std::string& origin);
};

struct IncrementalDecision {
  IncrementalProgress start;  // where the next window starts (state repaired if needed)
  bool state_behind = false;  // the marker showed a window the state missed
  std::string explanation;
};

// `state`, `marker`: the stream's state entry and the table's marker (null when absent).
Result<IncrementalDecision> DecideIncremental(const std::string& stream, const std::string& cursor,
                                              const Json& state, const Json& marker);

// CDC on a stream with its own change log: after the backfill, each sync applies the changes
// with from < position <= to and commits `to` as the stream's position.
struct CdcProgress {
  std::string stream;
  Position position;  // every change at or below it is in the table
  Position from;      // marker: where the committed batch of changes started
  // Something of the stream's was committed into its table (so the table has a marker): a
  // table without one then was dropped or emptied, not merely never written.
  bool landed = false;
  // The source's id of the table whose changes are in the table (StreamInfo::table_id), empty
  // when not known (the source has none, or the record is older).
  std::string table_id;
  // Where the table's rows of `table_id` were read (its backfill's SnapshotLogPosition); kept in
  // the record while `position` is below it (SharedStream::table_since).
  Position table_since;
  Json ToJson() const;
};

struct CdcDecision {
  bool backfill = false;  // true: a full refresh first (new or resumed), see `full`
  Decision full;          // the backfill's decision
  Position position;      // !backfill: apply changes after this position
  std::string table_id;   // !backfill: whose changes the table holds (empty: not known)
  Position table_since;   // !backfill: where those rows were read (none: not known)
  bool state_behind = false;
  std::string explanation;
};

// `backfilled`: the stream's mode is cdc (its table was loaded by a backfill, whose publish set the
// marker), not cdc_only (whose first changes may not have landed yet). A backfilled stream whose
// state has a change position while the table has no marker has lost its table (dropped,
// emptied, another destination): kCorruption naming the fix, never a silent gap.
// `table_id` is the source's table as discovered now (StreamInfo::table_id): a stream without a
// state entry whose marker holds the changes of another table (dropped and created again since)
// starts over (a new backfill, or for cdc_only the changes from now on), so that removing the
// state entry is how a stream stopped by a recreated table is started again.
// The change position a record (a state entry or a marker) proves the table holds: a CDC
// record's position, or the cdc_start of a published backfill; nullopt when it proves none.
// kCorruption when the record's position does not read as `kind`.
Result<std::optional<Position>> ProvenPosition(const Json& record, const std::string& origin,
                                               Position::Kind kind);

// Where a stream's state entry needs its change log from: a CDC record's position, or a
// backfill's cdc_start (published or still loading); nullopt when the entry holds neither, or
// one that does not read as `kind` (then the whole log is needed).
std::optional<Position> ChangesNeededAfter(const Json& record, Position::Kind kind);

// `kind`: the source's kind of change-log position (Source::position_kind).
Result<CdcDecision> DecideCdc(const Json& state, const Json& marker, bool backfilled,
                              Position::Kind kind, const std::string& table_id = "");

// A stream's marker within its table's: the whole marker for the stream of a single source
// (`source_name` empty); its entry of {"sources": {NAME: marker, ...}} when several sources feed
// the table (null when it has none).
Json PartOfMarker(const Json& table_marker, const std::string& source_name);

// Whether a stream's marker, read back after a commit whose outcome was unknown, shows that the
// commit landed: chunk `chunk` of load `run` committed; load `run` published; window `window`
// committed; the changes up to `position` (or later ones) applied.
// `kind` as FullRefreshProgress::FromJson; ChangesLanded reads the marker's position as
// `position`'s kind.
bool ChunkLanded(const Json& marker, const std::string& run, int64_t chunk, Position::Kind kind);
bool LoadPublished(const Json& marker, const std::string& run, Position::Kind kind);
bool WindowLanded(const Json& marker, const std::string& window);
bool ChangesLanded(const Json& marker, Position position, Position::Kind kind);

// "20261129T124500Z-3f2a1c"
std::string NewRunId();

}  // namespace ferry::engine
