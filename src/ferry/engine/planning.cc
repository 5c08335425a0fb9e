#include "ferry/engine/planning.h"

#include <algorithm>

#include "ferry/base/log.h"
#include "ferry/graph/graph.h"

namespace ferry::engine {
namespace {

std::string ActionName(Action a) {
  switch (a) {
    case Action::kStartNewRun:
      return "new load";
    case Action::kResume:
      return "resumed load";
    case Action::kAlreadyPublished:
      return "already published (state repaired)";
  }
  return "?";
}

// Decides an incremental stream's next window: repairs the state from the marker when the
// window starting at the state's cursor already landed, then captures the cursor's maximum.
Status PlanWindow(StreamTask* t, const Json& state, Recorder* recorder) {
  source::Source* src = t->source->src.get();
  const std::string& cursor = *t->settings.cursor;
  auto d = DecideIncremental(t->info.name, cursor, state, t->marker);
  if (!d.ok()) return d.status();
  FERRY_LOG(kInfo) << t->label << ": " << d->explanation;
  if (t->out->schema()->identifier_field_ids.empty()) {
    return Status::InvalidArgument(
        "stream " + t->label +
        ": incremental mode upserts by primary key, and the table has "
        "none (or a key column may be NULL); declare a NOT NULL primary key on the source table, "
        "set the stream's primary_key to NOT NULL columns, or use full_refresh");
  }
  if (d->state_behind) {
    FERRY_RETURN_IF_ERROR(recorder->Record(t->state_ns, t->info.name, d->start.ToJson()));
  }
  IncrementalProgress& w = t->window;
  w = d->start;
  w.from = d->start.cursor;
  w.window = IncrementalProgress::WindowId(t->info.name, w.from, d->start.ties);
  FERRY_ASSIGN_OR_RETURN(Json upper, src->MaxCursor(t->read_info(), cursor, w.from));
  t->bounds = WindowBounds{w.from, d->start.ties, upper};
  if (t->bounds.empty()) {
    t->report->action = "incremental: nothing new";
  } else if (upper.is_null()) {
    t->report->action = "incremental: rows at " + w.from.dump();
  } else {
    t->report->action = "incremental up to " + upper.dump();
  }
  return Status::OK();
}

// A cdc stream past its backfill, or a cdc_only stream: the changes this sync applies.
Status PlanChanges(StreamTask* t, CdcDecision cd, const Json& state, Recorder* recorder) {
  source::Source* src = t->source->src.get();
  t->changes.stream = t->info.name;
  // A record of an older ferry names no table: its changes are taken to be the table's now.
  t->changes.table_id = cd.backfill || cd.table_id.empty() ? t->info.table_id : cd.table_id;
  t->changes.table_since = cd.backfill ? source::Position() : cd.table_since;
  if (cd.backfill) {
    // cdc_only: no backfill; changes from now on.
    FERRY_ASSIGN_OR_RETURN(cd.position, src->ChangeLogEnd(t->info));
    cd.explanation = "cdc_only: applying changes after position " + cd.position.ToString();
    CdcProgress start{t->info.name, cd.position, cd.position, false, t->changes.table_id};
    FERRY_RETURN_IF_ERROR(recorder->Record(t->state_ns, t->info.name, start.ToJson()));
  } else if (cd.state_behind) {
    CdcProgress repaired{t->info.name, cd.position, cd.position, /*landed=*/true,
                         t->changes.table_id};
    FERRY_RETURN_IF_ERROR(recorder->Record(t->state_ns, t->info.name, repaired.ToJson()));
  }
  t->changes.landed = t->marker.is_object() || (state.is_object() && state.value("landed", false));
  FERRY_LOG(kInfo) << t->label << ": " << cd.explanation;
  if (src->SharedChangeLog()) {
    // One pass over the shared log serves every such stream of the source (see RunSync).
    t->shared_log = true;
    t->changes.from = t->changes.position = cd.position;
    t->report_from = cd.position;
    t->report->action = "cdc: changes after position " + cd.position.ToString();
    return Status::OK();
  }
  FERRY_ASSIGN_OR_RETURN(source::Position end, src->ChangeLogEnd(t->info));
  t->changes.from = cd.position;
  t->changes.position = std::max(cd.position, end);
  t->source->to_acknowledge.emplace_back(t->info, t->changes.position);
  t->report->action =
      t->changes.position > t->changes.from
          ? "cdc: changes " + t->changes.from.ToString() + ".." + t->changes.position.ToString()
          : "cdc: no new changes";
  return Status::OK();
}

// Applies a load's decision (full refresh, or a cdc stream's backfill). A new load's plan is in
// the state file before anything is read, so that a crash resumes this very load. Returns false
// when there is nothing to read (the load was published; only the state was behind).
Result<bool> ApplyLoad(StreamTask* t, const Decision& d, const std::string& new_run,
                       Recorder* recorder) {
  source::Source* src = t->source->src.get();
  FERRY_LOG(kInfo) << t->label << ": " << d.explanation;
  t->report->action = ActionName(d.action);
  if (d.action == Action::kAlreadyPublished) {
    FERRY_RETURN_IF_ERROR(recorder->Record(t->state_ns, t->info.name, d.progress.ToJson()));
    t->report->chunks_total = d.progress.plan.count;
    t->report->chunks_skipped = d.progress.plan.count;
    return false;
  }
  if (d.action == Action::kStartNewRun) {
    FullRefreshProgress p;
    p.stream = t->info.name;
    p.run = new_run;
    p.table_id = t->info.table_id;
    const Clock::time_point planning = Clock::now();
    FERRY_RETURN_IF_ERROR(graph::RunCatching("planning the chunks of " + t->label, [&]() -> Status {
      FERRY_ASSIGN_OR_RETURN(p.plan, src->PlanChunks(t->info, t->settings.chunk_rows));
      return Status::OK();
    }));
    FERRY_LOG(kInfo) << t->label << ": planned " << p.plan.count << " chunk(s)"
                     << (p.plan.rows > 0 ? " of about " + std::to_string(p.plan.rows) + " rows"
                                         : "")
                     << (p.plan.bounds.empty() ? "" : ", boundaries from the data") << " in "
                     << std::chrono::duration<double>(Clock::now() - planning).count() << " s";
    if (t->cdc_backfill) {
      // Changes after this point are applied once the load is published.
      FERRY_ASSIGN_OR_RETURN(source::Position start, src->ChangeLogEnd(t->info));
      p.cdc_start = start;
      p.table_since = src->SnapshotLogPosition();
    }
    FERRY_RETURN_IF_ERROR(recorder->Record(t->state_ns, t->info.name, p.ToJson()));
    t->progress = std::move(p);
  } else {
    t->progress = d.progress;
    t->progress.stream = t->info.name;
    if (d.state_behind) {
      FERRY_RETURN_IF_ERROR(recorder->Record(t->state_ns, t->info.name, t->progress.ToJson()));
    }
  }
  t->report->chunks_total = t->progress.plan.count;
  t->report->chunks_skipped = t->progress.committed.Count();
  t->chunks_landed.store(t->progress.committed.Count());
  return true;
}

}  // namespace

Status PlanTable(TableTask* table, Recorder* recorder, const std::string& state_path) {
  struct PartPlan {
    StreamTask* t;
    Json state;
    std::optional<CdcDecision> cdc;
    std::optional<Decision> load;
  };
  std::vector<PartPlan> plans;
  for (StreamTask* t : table->parts) {
    PartPlan pp{t, recorder->Get(t->state_ns, t->info.name), std::nullopt, std::nullopt};
    if (t->cdc()) {
      auto decided = DecideCdc(pp.state, t->marker, t->settings.mode == config::SyncMode::kCdc,
                               t->source->src->position_kind(), t->info.table_id);
      if (!decided.ok()) {
        return decided.status().WithContext("stream " + t->label + " (table " + table->table + ")");
      }
      if (decided->backfill && t->settings.mode == config::SyncMode::kCdc) {
        t->cdc_backfill = true;
        pp.load = decided->full;
      }
      pp.cdc = std::move(*decided);
    } else if (!t->incremental()) {
      auto d = DecideFullRefresh(pp.state, t->marker, t->source->src->position_kind());
      if (!d.ok()) {
        return d.status().WithContext("stream " + t->label + " (state file " + state_path + ")");
      }
      pp.load = std::move(*d);
    }
    if (pp.load && pp.load->action == Action::kResume) {
      FERRY_ASSIGN_OR_RETURN(std::string stale,
                             t->source->src->StalePlan(t->info, pp.load->progress.plan));
      if (stale.empty()) {
        FERRY_ASSIGN_OR_RETURN(stale,
                               t->source->src->TableChanged(t->info, pp.load->progress.table_id));
      }
      if (!stale.empty()) {
        FERRY_LOG(kWarn) << t->label << ": the unfinished load cannot resume (" << stale
                         << "); a new load starts, and replaces the table when published";
        pp.load->action = Action::kStartNewRun;
        pp.load->explanation = "a new load (the unfinished one's plan no longer fits)";
      }
    }
    plans.push_back(std::move(pp));
  }
  if (table->merged && std::any_of(plans.begin(), plans.end(),
                                   [](const PartPlan& pp) { return pp.load.has_value(); })) {
    const PartPlan& first = plans.front();
    bool together = true;
    for (const PartPlan& pp : plans) {
      together = together && pp.load && first.load &&
                 ((pp.load->action == Action::kStartNewRun &&
                   first.load->action == Action::kStartNewRun) ||
                  (pp.load->action == first.load->action &&
                   pp.load->progress.run == first.load->progress.run));
    }
    if (!together) {
      FERRY_LOG(kInfo) << table->table
                       << ": its sources are not at one point of one load; every source loads "
                          "again, and the new load replaces the table when published";
      for (PartPlan& pp : plans) {
        if (!pp.load) {
          pp.t->cdc_backfill = true;
          pp.load.emplace();
        }
        pp.load->action = Action::kStartNewRun;
        pp.load->explanation = "a new load of the merged table " + table->table;
      }
    }
  }
  const std::string run = NewRunId();
  table->active = false;
  for (PartPlan& pp : plans) {
    StreamTask* t = pp.t;
    if (pp.load) {
      FERRY_ASSIGN_OR_RETURN(bool read, ApplyLoad(t, *pp.load, run, recorder));
      table->active = table->active || read;
    } else if (t->incremental()) {
      FERRY_RETURN_IF_ERROR(PlanWindow(t, pp.state, recorder));
      table->active = true;
    } else {
      FERRY_RETURN_IF_ERROR(PlanChanges(t, std::move(*pp.cdc), pp.state, recorder));
      table->active = true;
    }
  }
  if (table->merged) {
    const bool shared = table->parts.front()->shared_log;
    for (StreamTask* t : table->parts) {
      if (t->shared_log != shared) {
        return Status::InvalidArgument(
            "table " + table->table + " merges changes read from a shared change log (" +
            table->parts.front()->label + ") with changes of a per-table change log (" + t->label +
            "); the streams of a merged table must come from sources of one kind (all "
            "PostgreSQL, or all SQLite)");
      }
    }
  }
  return Status::OK();
}

}  // namespace ferry::engine
