#include "ferry/engine/sync.h"

#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>

#include "ferry/base/deadline.h"
#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/engine/progress.h"
#include "ferry/engine/streams.h"
#include "ferry/engine/window.h"
#include "ferry/graph/align.h"
#include "ferry/graph/ordered_reads.h"
#include "ferry/sink/sink.h"
#include "ferry/state/state.h"

namespace ferry::engine {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Records acknowledged progress in the state file, one writer at a time.
class Recorder {
 public:
  Recorder(state::StateStore* store, state::PipelineState st)
      : store_(store), state_(std::move(st)) {}
  struct Entry {
    std::string ns;
    std::string stream;
    Json progress;
  };
  Status Record(const std::string& ns, const std::string& stream, const Json& progress) {
    return RecordAll({{ns, stream, progress}});
  }
  // Several streams' progress in one write (the parts of a merged table commit together).
  Status RecordAll(const std::vector<Entry>& entries) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : entries) state_.SetStream(e.ns, e.stream, e.progress);
    FERRY_RETURN_IF_ERROR(store_->Save(state_).WithContext("writing the state file"));
    FaultPoint("state.after_write");
    return Status::OK();
  }
  Json Get(const std::string& ns, const std::string& stream) {
    std::lock_guard<std::mutex> lock(mu_);
    return state_.Stream(ns, stream);
  }

 private:
  std::mutex mu_;
  state::StateStore* store_;
  state::PipelineState state_;  // guarded by mu_
};

// One source of the pipeline, open for this sync.
struct SourceRun {
  const config::SourceConfig* cfg = nullptr;
  std::unique_ptr<source::Source> src;
  std::vector<source::StreamInfo> streams;
  // Per-stream change logs read this sync: acknowledged once the sync succeeded.
  std::vector<std::pair<source::StreamInfo, int64_t>> to_acknowledge;
  source::Source::SharedRead read;  // the shared change log's read, if any
  // Set when a merged table's checkpoint waits for this source's barrier: the shared log's
  // reader takes a checkpoint at its next transaction boundary.
  std::atomic<bool> checkpoint_wanted{false};
};

// One stream's work in this sync: a source's table, or its part of a merged destination table.
struct StreamTask {
  source::StreamInfo info;
  config::StreamConfig settings;
  SourceRun* source = nullptr;
  std::string label;     // for messages: the stream, prefixed by its source's name when named
  std::string state_ns;  // the namespace its state file entry is keyed by
  std::shared_ptr<sink::SinkStream> out;  // shared by the parts of a merged table
  Json marker;                   // its marker as the table holds it (its part, in a merged table's)
  FullRefreshProgress progress;  // full refresh
  IncrementalProgress window;    // incremental: the window this sync reads (its id and start)
  WindowBounds bounds;           // incremental: what it reads (engine/window.h)
  CdcProgress changes;           // cdc after the backfill: the changes this sync applies
  bool cdc_backfill = false;     // cdc stream whose full refresh is new or in flight
  bool shared_log = false;       // cdc stream read from the source's shared change log
  int64_t report_from = 0;       // shared log: the position this sync started from
  int64_t commits = 0;           // cdc: commits of changes made by this sync
  bool incremental() const { return settings.mode == config::SyncMode::kIncremental; }
  bool cdc() const {
    return settings.mode == config::SyncMode::kCdc || settings.mode == config::SyncMode::kCdcOnly;
  }
  // Streams whose commits are upserts and deletes by key rather than appends of a load.
  bool keyed() const { return incremental() || (cdc() && !cdc_backfill); }
  std::shared_ptr<graph::Edge> edge;
  StreamReport* report = nullptr;
  Clock::time_point start;
};

// A destination table and the streams that feed it: one, or one per source (merged). The parts
// of a merged table commit together, each checkpoint with every part's progress in one marker.
struct TableTask {
  std::string table;
  std::vector<StreamTask*> parts;
  std::shared_ptr<graph::Edge> edge;  // what its sink receives (merged: aligned)
  bool merged = false;                // the pipeline has several sources
  bool active = true;                 // something to do this sync
};

// Hands a batch to a stream's sink (the batch's contents move; `b` is left empty).
bool Forward(StreamTask* t, Batch& b, bool deletes, const SyncOptions& opts) {
  if (opts.stop && opts.stop->requested()) return false;
  auto owned = std::make_unique<Batch>(t->out->schema());
  std::swap(*owned, b);
  return t->edge->Send(graph::Message::Data(std::move(owned), deletes));
}

class SourceNode : public graph::Node {
 public:
  // `readers`: connections that may read a load's chunks at once (see OpenReaders).
  SourceNode(source::Source* src, std::vector<StreamTask*> tasks, const SyncOptions& opts,
             int readers)
      : src_(src), tasks_(std::move(tasks)), opts_(opts), max_readers_(readers) {}
  std::string name() const override { return "source"; }

  Status Run() override {
    for (StreamTask* t : tasks_) {
      if (t->incremental()) {
        FERRY_RETURN_IF_ERROR(RunWindow(t));
        continue;
      }
      if (t->keyed()) {
        FERRY_RETURN_IF_ERROR(RunChanges(t));
        continue;
      }
      FERRY_RETURN_IF_ERROR(RunLoad(t));
      if (!t->edge->Send(graph::Message::End())) return Status::Cancelled("sink stopped");
    }
    return Status::OK();
  }

 private:
  // The load's pending chunks, read by up to `readers_` snapshot readers at once and handed to
  // the sink in chunk order, each chunk followed by its barrier.
  Status RunLoad(StreamTask* t) {
    std::vector<int64_t> pending;
    for (int64_t i = 0; i < t->progress.plan.count; ++i) {
      if (!t->progress.committed.Contains(i)) pending.push_back(i);
    }
    OpenReaders(pending.size());
    if (readers_.size() > 1) {
      FERRY_LOG(kInfo) << t->info.name << ": " << pending.size() << " chunks, read on "
                       << readers_.size() << " connections sharing one snapshot";
    }
    std::shared_ptr<const Schema> schema = t->out->schema();
    graph::PartReader read = [&](size_t r, size_t k, const auto& emit) {
      return readers_[r]->ReadChunk(t->info, t->progress.plan.At(pending[k]), schema,
                                    opts_.batch_rows, [&](Batch& b) {
                                      auto owned = std::make_unique<Batch>(schema);
                                      std::swap(*owned, b);
                                      return emit(std::move(owned));
                                    });
    };
    auto hand = [&](std::unique_ptr<Batch> b) {
      if (opts_.stop && opts_.stop->requested()) return false;
      return t->edge->Send(graph::Message::Data(std::move(b)));
    };
    auto done = [&](size_t k) {
      const int64_t i = pending[k];
      graph::Barrier barrier{graph::CheckpointId(i), t->info.name,
                             Json{{"chunk", i}, {"id", t->progress.plan.At(i).Id(t->info.name)}}};
      return t->edge->Send(graph::Message::MakeBarrier(std::move(barrier)));
    };
    // The readers share the edge's budget: as many batches wait as with one reader.
    const size_t per_part = std::max<size_t>(1, opts_.edge_capacity / readers_.size());
    Status s = graph::ReadInOrder(pending.size(), readers_.size(), per_part, read, hand, done);
    if (!s.ok() && opts_.stop && opts_.stop->requested()) {
      return Status::Cancelled("stop requested");
    }
    return s;
  }

  // Up to `wanted` readers of the snapshot (the source itself is the first). A source that
  // cannot share its snapshot, or a server that refuses more connections, leaves fewer.
  void OpenReaders(size_t wanted) {
    wanted = std::min(wanted, static_cast<size_t>(std::max(max_readers_, 1)));
    if (readers_.empty()) readers_.push_back(src_);
    while (readers_.size() < wanted && !readers_closed_) {
      auto r = src_->OpenSnapshotReader();
      if (!r.ok()) {
        FERRY_LOG(kWarn) << "reading with " << readers_.size()
                         << " connection(s): another snapshot reader could not open ("
                         << r.status().ToString() << ")";
        readers_closed_ = true;
        break;
      }
      if (!*r) {
        readers_closed_ = true;  // the source reads its snapshot on one connection
        break;
      }
      readers_.push_back(r->get());
      owned_readers_.push_back(std::move(*r));
      FERRY_LOG(kDebug) << "snapshot reader " << readers_.size() << " open";
    }
  }

  // One incremental window: the rows, then a barrier carrying the window's end and the rows
  // that tie at it. A window that found nothing new sends no barrier: nothing is committed.
  Status RunWindow(StreamTask* t) {
    if (!t->bounds.empty()) {
      auto read = ReadWindow(src_, t->info, t->window.cursor_column, t->bounds, t->out->schema(),
                             opts_.batch_rows, static_cast<size_t>(t->settings.tie_rows),
                             [&](Batch& b) { return Forward(t, b, false); });
      if (!read.ok()) {
        if (opts_.stop && opts_.stop->requested()) return Status::Cancelled("stop requested");
        return read.status();
      }
      if (read->rows == 0 && t->bounds.upper.is_null()) {
        t->report->action = "incremental: nothing new";
      } else {
        graph::Barrier barrier{graph::CheckpointId(0), t->info.name,
                               Json{{"window", t->window.window},
                                    {"cursor", read->end},
                                    {"ties", read->ties.ToJson()}}};
        if (!t->edge->Send(graph::Message::MakeBarrier(std::move(barrier)))) {
          return Status::Cancelled("sink stopped");
        }
      }
    }
    if (!t->edge->Send(graph::Message::End())) return Status::Cancelled("sink stopped");
    return Status::OK();
  }

  // CDC: the last change of every key since the stream's position, then a barrier.
  Status RunChanges(StreamTask* t) {
    const CdcProgress& c = t->changes;
    if (c.position > c.from) {
      Status s = src_->ReadChanges(t->info, c.from, c.position, t->out->schema(), opts_.batch_rows,
                                   [&](Batch& b, bool deletes) { return Forward(t, b, deletes); });
      if (!s.ok()) {
        if (opts_.stop && opts_.stop->requested()) return Status::Cancelled("stop requested");
        return s;
      }
      graph::Barrier barrier{graph::CheckpointId(c.position), t->info.name,
                             Json{{"position", c.position}}};
      if (!t->edge->Send(graph::Message::MakeBarrier(std::move(barrier)))) {
        return Status::Cancelled("sink stopped");
      }
    }
    if (!t->edge->Send(graph::Message::End())) return Status::Cancelled("sink stopped");
    return Status::OK();
  }

  bool Forward(StreamTask* t, Batch& b, bool deletes = false) {
    return engine::Forward(t, b, deletes, opts_);
  }

  source::Source* src_;
  std::vector<StreamTask*> tasks_;
  const SyncOptions& opts_;
  int max_readers_;
  std::vector<source::Source*> readers_;  // readers_[0] is src_
  std::vector<std::unique_ptr<source::Source>> owned_readers_;
  bool readers_closed_ = false;  // no further reader can open
};

// CDC from a change log shared by all streams (PostgreSQL): one pass over the log feeds every
// stream's sink; a checkpoint becomes a barrier on every edge, so each sink commits its part
// with the checkpoint's position.
class SharedLogSourceNode : public graph::Node {
 public:
  SharedLogSourceNode(source::Source* src, std::vector<StreamTask*> tasks, const SyncOptions& opts,
                      const config::CheckpointConfig& policy, source::Source::SharedRead* result)
      : src_(src), tasks_(std::move(tasks)), opts_(opts), policy_(policy), result_(result) {}
  std::string name() const override { return "source (change log)"; }

  Status Run() override {
    std::vector<source::Source::SharedStream> streams;
    for (StreamTask* t : tasks_) {
      streams.push_back({&t->info, t->out->schema(), t->changes.from, t->changes.table_id,
                         t->changes.table_since});
    }
    auto emit = [&](size_t i, Batch& b, bool deletes) {
      return Forward(tasks_[i], b, deletes, opts_);
    };
    auto checkpoint = [&](int64_t position, const std::vector<std::string>& table_ids) {
      for (size_t i = 0; i < tasks_.size(); ++i) {
        StreamTask* t = tasks_[i];
        Json at{{"position", position}};
        if (i < table_ids.size() && !table_ids[i].empty()) at["table_id"] = table_ids[i];
        graph::Barrier barrier{graph::CheckpointId(position), t->info.name, std::move(at)};
        if (!t->edge->Send(graph::Message::MakeBarrier(std::move(barrier)))) return false;
      }
      return true;
    };
    source::Source::SharedReadOptions read;
    read.batch_rows = opts_.batch_rows;
    read.policy = policy_;
    read.follow = opts_.follow;
    std::atomic<bool>* wanted = &tasks_.front()->source->checkpoint_wanted;
    read.checkpoint_wanted = [wanted] { return wanted->exchange(false); };
    if (opts_.follow) {
      read.policy.interval_ms = std::min(read.policy.interval_ms, opts_.follow_commit_ms);
      read.stopping = [this] { return opts_.stop && opts_.stop->requested(); };
    }
    auto r = src_->ReadSharedChanges(streams, read, emit, checkpoint);
    if (!r.ok()) {
      if (opts_.stop && opts_.stop->requested()) return Status::Cancelled("stop requested");
      return r.status();
    }
    *result_ = *r;
    for (StreamTask* t : tasks_) {
      if (!t->edge->Send(graph::Message::End())) return Status::Cancelled("sink stopped");
    }
    return Status::OK();
  }

 private:
  source::Source* src_;
  std::vector<StreamTask*> tasks_;
  const SyncOptions& opts_;
  const config::CheckpointConfig& policy_;
  source::Source::SharedRead* result_;
};

// Commits a destination table: the batches its parts' sources send, at every checkpoint, with
// every part's progress in the table's marker; then records the same progress in the state file.
class SinkNode : public graph::Node {
 public:
  // `changes_recorded`, when set, is called after each commit of changes is in the state file.
  // `align`, for a merged table, hears when each checkpoint it handed on is complete.
  SinkNode(TableTask* table, Recorder* recorder, const std::string& pipeline,
           const SyncOptions& opts, int64_t timeout_ms,
           std::function<void()> changes_recorded = nullptr, graph::AlignNode* align = nullptr)
      : table_(table),
        out_(table->parts.front()->out.get()),
        recorder_(recorder),
        pipeline_(pipeline),
        opts_(opts),
        timeout_ms_(timeout_ms),
        changes_recorded_(std::move(changes_recorded)),
        align_(align),
        rows_(table->parts.size(), 0),
        written_(table->parts.size(), 0),
        waiting_(table->parts.size()) {}
  std::string name() const override { return "sink " + table_->table; }

  Status Run() override {
    Status s = Loop();
    if (!s.ok()) out_->DiscardPending();
    return s;
  }

 private:
  size_t parts() const { return table_->parts.size(); }
  StreamTask& part(size_t i) { return *table_->parts[i]; }
  bool keyed() const { return table_->parts.front()->keyed(); }
  bool incremental() const { return table_->parts.front()->incremental(); }
  const std::string& run() const { return table_->parts.front()->progress.run; }

  Status Loop() {
    if (!keyed()) {
      FERRY_RETURN_IF_ERROR(out_->StartLoad(run()));
    }
    while (auto m = table_->edge->Receive()) {
      switch (m->kind) {
        case graph::Message::Kind::kBatch: {
          if (m->deletes) {
            FERRY_RETURN_IF_ERROR(out_->WriteDeleteKeys(*m->batch));
          } else if (keyed()) {
            FERRY_RETURN_IF_ERROR(out_->WriteUpserts(*m->batch));
          } else {
            FERRY_RETURN_IF_ERROR(out_->Write(*m->batch));
          }
          const size_t origin = std::min<size_t>(m->origin, parts() - 1);
          rows_[origin] += static_cast<int64_t>(m->batch->num_rows());
          written_[origin] += m->batch->num_rows();
          break;
        }
        case graph::Message::Kind::kBarrier: {
          const std::vector<std::vector<Json>> at = Positions(m->barrier);
          if (incremental()) {
            FERRY_RETURN_IF_ERROR(CommitWindows(at));
          } else if (keyed()) {
            FERRY_RETURN_IF_ERROR(CommitChanges(at));
          } else {
            FERRY_RETURN_IF_ERROR(CommitChunks(at));
          }
          if (align_) align_->Acknowledge();
          break;
        }
        case graph::Message::Kind::kEnd:
          if (keyed()) {
            Finish();
            return Status::OK();
          }
          // Chunks still waiting for their commit are committed before the publish.
          if (out_->HasPending()) {
            FERRY_RETURN_IF_ERROR(CommitChunks(std::vector<std::vector<Json>>(parts()), true));
          }
          return Publish();
      }
    }
    return Status::Cancelled("the source stopped before the end of " + table_->table);
  }

  // What each part's source reached at this checkpoint: its barrier's position, or for a merged
  // table the positions of every barrier it sent since the previous checkpoint (often none).
  std::vector<std::vector<Json>> Positions(const graph::Barrier& b) const {
    if (parts() == 1 && !b.position.contains("inputs")) return {{b.position}};
    std::vector<std::vector<Json>> at(parts());
    const Json& inputs = b.position["inputs"];
    for (size_t i = 0; i < parts() && i < inputs.size(); ++i) {
      for (const auto& p : inputs[i]) at[i].push_back(p);
    }
    return at;
  }

  // The table's marker from its parts' markers.
  Json TableMarker(const std::vector<Json>& markers) {
    if (!table_->merged) return markers.front();
    Json m = {{"sources", Json::object()}};
    for (size_t i = 0; i < parts(); ++i) m["sources"][part(i).source->cfg->name] = markers[i];
    return m;
  }
  Json PartMarker(const Json& table_marker, size_t i) {
    return PartOfMarker(table_marker, table_->merged ? part(i).source->cfg->name : "");
  }

  // Records the progress of the parts `which` (every part when empty) in one state write.
  Status Record(const std::vector<size_t>& which, const std::function<Json(StreamTask&)>& of) {
    std::vector<Recorder::Entry> entries;
    for (size_t i = 0; i < parts(); ++i) {
      if (!which.empty() && std::find(which.begin(), which.end(), i) == which.end()) continue;
      entries.push_back({part(i).state_ns, part(i).info.name, of(part(i))});
    }
    if (entries.empty()) return Status::OK();
    return recorder_->RecordAll(entries);
  }

  static std::string Join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
    return out;
  }

  // A checkpoint of a load: the chunks each part completed, committed with the marker on the
  // load's branch. A chunk's commit waits (its barrier kept in `waiting_`) while its chunk held no
  // row, or while the destination's files are smaller than readers want
  // (SinkStream::LoadCommitDue, unless chunk_rows is set): it rides on the next commit's marker,
  // or on the publish. A crash before then reads those chunks again.
  Status CommitChunks(std::vector<std::vector<Json>> at, bool force = false) {
    for (size_t i = 0; i < parts(); ++i) {
      at[i].insert(at[i].begin(), waiting_[i].begin(), waiting_[i].end());
      waiting_[i].clear();
    }
    const bool empty = !out_->HasPending() &&
                       std::all_of(rows_.begin(), rows_.end(), [](int64_t n) { return n == 0; });
    const bool per_chunk =
        std::any_of(table_->parts.begin(), table_->parts.end(),
                    [](const StreamTask* t) { return t->settings.chunk_rows_set; });
    if (empty || (!force && !per_chunk && !out_->LoadCommitDue())) {
      waiting_ = std::move(at);
      return Status::OK();
    }
    std::vector<FullRefreshProgress> next(parts());
    std::vector<Json> markers(parts());
    std::vector<std::string> ids;
    for (size_t i = 0; i < parts(); ++i) {
      next[i] = part(i).progress;
      for (const auto& p : at[i]) {
        next[i].committed.Add(p["chunk"].get<int64_t>());
        ids.push_back(p["id"].get<std::string>());
      }
      next[i].rows += rows_[i];
      markers[i] = next[i].ToJson();
    }
    auto landed = [&](const Json& m) {
      for (size_t i = 0; i < parts(); ++i) {
        for (const auto& p : at[i]) {
          if (!ChunkLanded(PartMarker(m, i), run(), p["chunk"].get<int64_t>())) return false;
        }
      }
      return true;
    };
    // Many chunks in one commit: the first and the last name them.
    const std::string chunks = ids.size() <= 4 ? Join(ids)
                                               : ids.front() + ",...," + ids.back() + " (" +
                                                     std::to_string(ids.size()) + " chunks)";
    std::map<std::string, std::string> summary = {
        {"ferry.pipeline", pipeline_}, {"ferry.run", run()}, {"ferry.chunk", chunks}};
    auto r = Timed([&] { return out_->Commit(run(), TableMarker(markers), summary, landed); });
    if (!r.ok()) return r.status().WithContext("committing " + chunks);
    for (size_t i = 0; i < parts(); ++i) {
      part(i).progress = next[i];
      rows_[i] = 0;
    }
    FERRY_RETURN_IF_ERROR(Record({}, [](StreamTask& t) { return t.progress.ToJson(); }));
    if (opts_.print_progress) {
      for (size_t i = 0; i < parts(); ++i) {
        if (at[i].empty()) continue;
        const FullRefreshProgress& p = part(i).progress;
        FERRY_LOG(kInfo) << part(i).label << ": " << p.rows << " rows"
                         << (p.plan.rows > 0 ? " of about " + std::to_string(p.plan.rows) : "")
                         << " committed in this load (chunk " << p.committed.Count() << " of "
                         << p.plan.count << ")";
      }
    }
    return Status::OK();
  }

  // The end of a load: main takes the load's contents, and every part's marker says published.
  Status Publish() {
    std::vector<FullRefreshProgress> done(parts());
    std::vector<Json> markers(parts());
    for (size_t i = 0; i < parts(); ++i) {
      done[i] = part(i).progress;
      for (const Json& p : waiting_[i]) done[i].committed.Add(p["chunk"].get<int64_t>());
      done[i].published = true;
      markers[i] = done[i].ToJson();
    }
    auto landed = [&](const Json& m) {
      for (size_t i = 0; i < parts(); ++i) {
        if (!PublishLanded(PartMarker(m, i), run())) return false;
      }
      return true;
    };
    auto r = Timed([&] { return out_->Publish(run(), TableMarker(markers), landed); });
    if (!r.ok()) return r.status().WithContext("publishing the load of " + table_->table);
    for (size_t i = 0; i < parts(); ++i) part(i).progress = done[i];
    FERRY_RETURN_IF_ERROR(Record({}, [](StreamTask& t) { return t.progress.ToJson(); }));
    Finish();
    if (opts_.print_progress) {
      int64_t rows = 0;
      for (size_t i = 0; i < parts(); ++i) rows += part(i).progress.rows;
      FERRY_LOG(kInfo) << table_->table << ": load published, " << rows << " rows";
    }
    return Status::OK();
  }

  // Commits incremental windows: the upserted rows, their keys as equality deletes, and the
  // marker naming each window, in one snapshot; then the state takes each window's end.
  Status CommitWindows(const std::vector<std::vector<Json>>& at) {
    std::vector<size_t> in;
    for (size_t i = 0; i < parts(); ++i) {
      if (!at[i].empty()) in.push_back(i);
    }
    // A commit with rows (or one that writes the marker anyway) leaves the marker in the table.
    const bool lands = out_->HasPending() || out_->CheapMarkerCommits();
    std::vector<Json> markers(parts());
    std::vector<std::string> windows;
    for (size_t i = 0; i < parts(); ++i) markers[i] = part(i).marker;
    for (size_t i : in) {
      IncrementalProgress& w = part(i).window;
      const Json& end = at[i].back();
      w.cursor = end["cursor"];
      FERRY_ASSIGN_OR_RETURN(CursorTies ties, CursorTies::FromJson(end["ties"], "a window's end"));
      w.ties = std::move(ties);
      if (lands) w.landed = true;
      markers[i] = w.ToJson();
      windows.push_back(part(i).window.window);
    }
    auto landed = [&](const Json& m) {
      for (size_t i : in) {
        const Json j = PartMarker(m, i);
        if (!j.is_object() || j.value("mode", "") != "incremental" ||
            j.value("window", "") != part(i).window.window) {
          return false;
        }
      }
      return true;
    };
    std::map<std::string, std::string> summary = {{"ferry.pipeline", pipeline_},
                                                  {"ferry.window", Join(windows)}};
    auto r = Timed([&] { return out_->Commit("", TableMarker(markers), summary, landed); });
    if (!r.ok()) return r.status().WithContext("committing window " + Join(windows));
    for (size_t i : in) part(i).marker = markers[i];
    FERRY_RETURN_IF_ERROR(Record(in, [](StreamTask& t) { return t.window.ToJson(); }));
    if (opts_.print_progress) {
      for (size_t i : in) {
        const IncrementalProgress& w = part(i).window;
        FERRY_LOG(kInfo) << part(i).label << ": rows up to " << part(i).info.name << "."
                         << w.cursor_column << " = " << w.cursor.dump() << " committed";
      }
    }
    return Status::OK();
  }

  // Commits the changes since the previous checkpoint (upserts and deletes by key), each part
  // with its source's new position. A part already past it (its marker was ahead) keeps its
  // position.
  Status CommitChanges(const std::vector<std::vector<Json>>& at) {
    std::vector<size_t> in;
    bool moved = false;
    for (size_t i = 0; i < parts(); ++i) {
      if (at[i].empty()) continue;
      CdcProgress& c = part(i).changes;
      c.position = std::max(at[i].back()["position"].get<int64_t>(), c.from);
      // The table whose changes these are (a shared log tells it with each checkpoint).
      c.table_id = at[i].back().value("table_id", c.table_id);
      moved = moved || c.position > c.from;
      in.push_back(i);
    }
    auto done = [&] {
      for (size_t i : in) part(i).changes.from = part(i).changes.position;
    };
    if (!out_->HasPending() && !(out_->CheapMarkerCommits() && moved)) {
      // Nothing of these streams in the checkpoint: only the state moves on.
      if (moved) {
        FERRY_RETURN_IF_ERROR(Record(in, [](StreamTask& t) { return t.changes.ToJson(); }));
        if (changes_recorded_) changes_recorded_();
      }
      done();
      return Status::OK();
    }
    std::vector<Json> markers(parts());
    std::vector<std::string> positions;
    for (size_t i = 0; i < parts(); ++i) markers[i] = part(i).marker;
    for (size_t i : in) {
      part(i).changes.landed = true;
      markers[i] = part(i).changes.ToJson();
      positions.push_back((table_->merged ? part(i).source->cfg->name + ":" : std::string()) +
                          std::to_string(part(i).changes.position));
    }
    auto landed = [&](const Json& m) {
      for (size_t i : in) {
        const Json j = PartMarker(m, i);
        if (!j.is_object() || j.value("mode", "") != "cdc" ||
            j.value("position", int64_t{-1}) < part(i).changes.position) {
          return false;
        }
      }
      return true;
    };
    std::map<std::string, std::string> summary = {{"ferry.pipeline", pipeline_},
                                                  {"ferry.position", Join(positions)}};
    auto r = Timed([&] { return out_->Commit("", TableMarker(markers), summary, landed); });
    if (!r.ok()) return r.status().WithContext("committing changes up to " + Join(positions));
    for (size_t i : in) part(i).marker = markers[i];
    FERRY_RETURN_IF_ERROR(Record(in, [](StreamTask& t) { return t.changes.ToJson(); }));
    if (changes_recorded_) changes_recorded_();
    for (size_t i : in) {
      ++part(i).commits;
      if (opts_.print_progress) {
        FERRY_LOG(kInfo) << part(i).label << ": changes " << part(i).changes.from << ".."
                         << part(i).changes.position << " committed";
      }
    }
    done();
    return Status::OK();
  }

  // A commit (or publish) of the sink, interrupted when it runs past checkpoint.timeout. An
  // interrupted commit that failed abandons the checkpoint: nothing of it is in the state file,
  // and the round fails retryably (its changes are read again). One that landed all the same is
  // kept, as any commit is.
  template <typename Commit>
  Result<sink::CommitResult> Timed(Commit&& commit) {
    Result<sink::CommitResult> r = Status::Internal("the commit did not run");
    bool interrupted = RunWithDeadline(
        timeout_ms_, [&] { r = commit(); },
        [&] {
          FERRY_LOG(kWarn) << table_->table << ": the commit has run for "
                           << FormatSeconds(timeout_ms_)
                           << " (checkpoint.timeout); interrupting it";
          out_->Interrupt();
        });
    if (!interrupted || r.ok()) return r;
    return Status::Unavailable(
        "the checkpoint did not complete within checkpoint.timeout (" + FormatSeconds(timeout_ms_) +
        ") and was abandoned; nothing of it is recorded and it is read again (" +
        r.status().message() +
        "). If this repeats, look for what holds the destination up (a lock another session "
        "holds, an overloaded server) or raise checkpoint.timeout");
  }

  static std::string FormatSeconds(int64_t ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(ms) / 1000.0);
    return buf;
  }

  void Finish() {
    for (size_t i = 0; i < parts(); ++i) {
      StreamReport* report = part(i).report;
      report->seconds = SecondsSince(part(i).start);
      // A merged table's files hold every part's rows: they are counted with the first part.
      report->rows = table_->merged ? written_[i] : out_->totals().rows;
      if (i == 0) {
        report->files = out_->totals().files;
        report->bytes = out_->totals().bytes;
      }
    }
  }

  static std::optional<FullRefreshProgress> LoadOf(const Json& marker) {
    if (!marker.is_object()) return std::nullopt;
    auto p = FullRefreshProgress::FromJson(marker, "marker");
    if (!p.ok()) return std::nullopt;
    return *p;
  }
  static bool ChunkLanded(const Json& marker, const std::string& run, int64_t chunk) {
    auto m = LoadOf(marker);
    return m && m->run == run && m->committed.Contains(chunk);
  }
  static bool PublishLanded(const Json& marker, const std::string& run) {
    auto m = LoadOf(marker);
    return m && m->run == run && m->published;
  }

  TableTask* table_;
  sink::SinkStream* out_;
  Recorder* recorder_;
  std::string pipeline_;
  const SyncOptions& opts_;
  int64_t timeout_ms_;  // checkpoint.timeout
  std::function<void()> changes_recorded_;
  graph::AlignNode* align_;
  std::vector<int64_t> rows_;      // per part: rows since its last commit
  std::vector<uint64_t> written_;  // per part: rows written by this sync
  // per part: the barriers of chunks not committed yet (see CommitChunks)
  std::vector<std::vector<Json>> waiting_;
};

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
  FERRY_ASSIGN_OR_RETURN(Json upper, src->MaxCursor(t->info, cursor, w.from));
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
  t->changes.table_since = cd.backfill ? 0 : cd.table_since;
  if (cd.backfill) {
    // cdc_only: no backfill; changes from now on.
    FERRY_ASSIGN_OR_RETURN(cd.position, src->ChangeLogEnd(t->info));
    cd.explanation = "cdc_only: applying changes after position " + std::to_string(cd.position);
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
    t->report->action = "cdc: changes after position " + std::to_string(cd.position);
    return Status::OK();
  }
  FERRY_ASSIGN_OR_RETURN(int64_t end, src->ChangeLogEnd(t->info));
  t->changes.from = cd.position;
  t->changes.position = std::max(cd.position, end);
  t->source->to_acknowledge.emplace_back(t->info, t->changes.position);
  t->report->action = t->changes.position > t->changes.from
                          ? "cdc: changes " + std::to_string(t->changes.from) + ".." +
                                std::to_string(t->changes.position)
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
      FERRY_ASSIGN_OR_RETURN(int64_t start, src->ChangeLogEnd(t->info));
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
  return true;
}

// Compares every part's state with its marker and plans what this sync does for the table.
// The parts of a merged table load together (one load, one branch, one publish): when they are
// not at one point of one load (a source added, a state lost, a load resumed against one that
// finished), every part starts a new load.
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
                               t->info.table_id);
      if (!decided.ok()) {
        return decided.status().WithContext("stream " + t->label + " (table " + table->table + ")");
      }
      if (decided->backfill && t->settings.mode == config::SyncMode::kCdc) {
        t->cdc_backfill = true;
        pp.load = decided->full;
      }
      pp.cdc = std::move(*decided);
    } else if (!t->incremental()) {
      auto d = DecideFullRefresh(pp.state, t->marker);
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

// What the two sources' versions of a merged table's stream differ in, or "" when they agree.
std::string SchemaDifference(const Schema& a, const Schema& b) {
  if (a.fields.size() != b.fields.size()) {
    return std::to_string(a.fields.size()) + " columns against " + std::to_string(b.fields.size());
  }
  for (size_t i = 0; i < a.fields.size(); ++i) {
    const Field& x = a.fields[i];
    const Field& y = b.fields[i];
    if (x.name != y.name)
      return "column " + std::to_string(i + 1) + " is " + x.name + " / " + y.name;
    if (!x.type.SameShape(y.type)) {
      return "column " + x.name + " is " + x.type.ToIceberg() + " / " + y.type.ToIceberg();
    }
  }
  if (a.identifier_field_ids != b.identifier_field_ids) return "the primary keys differ";
  return "";
}

// The state file keys a stream by namespace and name; a named source's streams are kept apart.
std::string StateNamespace(const config::SourceConfig& sc, const source::StreamInfo& info) {
  return sc.name.empty() ? info.ns : sc.name + "/" + info.ns;
}

// Two streams that map to one destination table must come from different sources (several
// sources merged into it) and have the same mode, columns and key.
Status CheckSameTable(const std::string& table, const config::SourceConfig& sa,
                      const source::StreamInfo& a, const config::SourceConfig& sb,
                      const source::StreamInfo& b) {
  const std::string la = SourceLabel(sa, a.name), lb = SourceLabel(sb, b.name);
  if (&sa == &sb) {
    return Status::InvalidArgument("streams " + la + " and " + lb + " both map to table " + table +
                                   "; list only one of them");
  }
  const config::SyncMode ma = StreamSettings(sa, a.name).mode;
  const config::SyncMode mb = StreamSettings(sb, b.name).mode;
  if (ma != mb) {
    return Status::InvalidArgument("table " + table + " merges " + la + " (" +
                                   std::string(config::SyncModeName(ma)) + ") and " + lb + " (" +
                                   std::string(config::SyncModeName(mb)) +
                                   "); the streams of a merged table need the same mode");
  }
  std::string diff = SchemaDifference(a.ToSchema(), b.ToSchema());
  if (!diff.empty()) {
    return Status::InvalidArgument("table " + table + " merges " + la + " and " + lb +
                                   ", whose columns differ: " + diff +
                                   "; the merged streams need the same columns and key");
  }
  return Status::OK();
}

// Opens every source of the pipeline and selects the streams it syncs (key overrides applied).
// `prepare_capture`: change capture is installed for cdc streams (before any snapshot point, so
// that no later change is missed).
Result<std::vector<std::unique_ptr<SourceRun>>> OpenSources(config::PipelineConfig& cfg,
                                                            bool prepare_capture) {
  std::vector<std::unique_ptr<SourceRun>> out;
  for (config::SourceConfig& sc : cfg.sources) {
    auto run = std::make_unique<SourceRun>();
    run->cfg = &sc;
    FERRY_ASSIGN_OR_RETURN(OpenedSource opened, OpenSelected(sc));
    run->src = std::move(opened.src);
    run->streams = std::move(opened.streams);
    for (auto& info : run->streams) {
      config::StreamConfig settings = StreamSettings(sc, info.name);
      FERRY_RETURN_IF_ERROR(InSource(sc, ApplyKeyOverride(settings, &info)));
      if (prepare_capture && (settings.mode == config::SyncMode::kCdc ||
                              settings.mode == config::SyncMode::kCdcOnly)) {
        FERRY_RETURN_IF_ERROR(InSource(sc, run->src->PrepareChangeCapture(info)));
      }
    }
    out.push_back(std::move(run));
  }
  return out;
}

// How far a source's shared change log may be forgotten: up to what EVERY cdc stream of the
// source has in its table and in the state file, including backfills still in flight (their
// changes start at cdc_start); 0 while a stream has no position yet.
int64_t SharedLogFloor(const SourceRun& s, Recorder* recorder, int64_t upper) {
  int64_t floor = upper;
  for (const auto& info : s.streams) {
    config::StreamConfig sc = StreamSettings(*s.cfg, info.name);
    if (sc.mode != config::SyncMode::kCdc && sc.mode != config::SyncMode::kCdcOnly) continue;
    Json st = recorder->Get(StateNamespace(*s.cfg, info), info.name);
    if (st.is_object() && st.value("mode", "") == "cdc") {
      floor = std::min(floor, st.value("position", int64_t{0}));
    } else if (st.is_object() && st.contains("cdc_start")) {
      floor = std::min(floor, st.value("cdc_start", int64_t{0}));
    } else {
      return 0;
    }
  }
  return floor;
}

}  // namespace

Result<std::vector<source::StreamInfo>> RunDiscover(config::PipelineConfig& cfg) {
  std::vector<source::StreamInfo> out;
  for (config::SourceConfig& sc : cfg.sources) {
    auto src = source::OpenSource(sc);
    if (!src.ok()) return InSource(sc, src.status());
    auto streams = (*src)->Discover();
    if (!streams.ok()) return InSource(sc, streams.status());
    for (auto& info : *streams) {
      info.name = SourceLabel(sc, info.name);
      out.push_back(std::move(info));
    }
  }
  return out;
}

Status RunStateReport(config::PipelineConfig& cfg, std::vector<StreamStateReport>* out) {
  FERRY_ASSIGN_OR_RETURN(auto sources, OpenSources(cfg, /*prepare_capture=*/false));
  auto dst = sink::Sink::Open(cfg.destination, cfg.name);
  if (!dst.ok()) return dst.status().WithContext("destination");
  FERRY_ASSIGN_OR_RETURN(auto loaded, state::OpenFileStateStore(cfg.state_path)->Load());
  for (const auto& s : sources) {
    for (const auto& info : s->streams) {
      StreamStateReport r;
      r.stream = SourceLabel(*s->cfg, info.name);
      r.table = (*dst)->TableName(info.name);
      config::StreamConfig sc = StreamSettings(*s->cfg, info.name);
      r.mode = std::string(config::SyncModeName(sc.mode));
      r.state = loaded ? loaded->Stream(StateNamespace(*s->cfg, info), info.name) : Json(nullptr);
      FERRY_ASSIGN_OR_RETURN(Json marker, (*dst)->ReadMarker(info.name));
      r.marker = PartOfMarker(marker, s->cfg->name);
      if (sc.mode == config::SyncMode::kCdc || sc.mode == config::SyncMode::kCdcOnly) {
        auto d = DecideCdc(r.state, r.marker, sc.mode == config::SyncMode::kCdc, info.table_id);
        if (!d.ok()) {
          r.restart = "stops: " + d.status().message();
          out->push_back(std::move(r));
          continue;
        }
        r.restart = d->explanation;
        r.state_behind = d->state_behind || (d->backfill && d->full.state_behind);
      } else if (sc.mode == config::SyncMode::kIncremental) {
        auto d = DecideIncremental(info.name, sc.cursor.value_or(""), r.state, r.marker);
        if (!d.ok()) return d.status();
        r.restart = d->explanation;
        r.state_behind = d->state_behind;
      } else {
        auto d = DecideFullRefresh(r.state, r.marker);
        if (!d.ok()) return d.status();
        r.restart = d->explanation;
        r.state_behind = d->state_behind;
      }
      out->push_back(std::move(r));
    }
  }
  return Status::OK();
}

Status RunCheck(config::PipelineConfig& cfg, CheckReport* report) {
  FERRY_ASSIGN_OR_RETURN(auto sources, OpenSources(cfg, /*prepare_capture=*/false));
  auto dst = sink::Sink::Open(cfg.destination, cfg.name);
  if (!dst.ok()) return dst.status().WithContext("destination");
  report->destination = (*dst)->Describe();
  report->guarantee = (*dst)->Guarantee();
  if (cfg.merged()) {
    report->guarantee += cfg.checkpoint.exactly_once
                             ? "; tables fed by several sources: exactly-once (barriers aligned)"
                             : "; tables fed by several sources: at-least-once (checkpoint.mode "
                               "at_least_once: a restart may apply some rows twice)";
  }
  // The first stream of each destination table, to check the others merged into it against.
  std::map<std::string, std::pair<const config::SourceConfig*, const source::StreamInfo*>>
      first_of_table;
  for (const auto& s : sources) {
    const std::string described = s->src->Describe();
    report->source += (report->source.empty() ? "" : "; ") +
                      (s->cfg->name.empty() ? described : s->cfg->name + ": " + described);
    for (const auto& info : s->streams) {
      config::StreamConfig sc = StreamSettings(*s->cfg, info.name);
      if (sc.mode == config::SyncMode::kCdc || sc.mode == config::SyncMode::kCdcOnly) {
        FERRY_RETURN_IF_ERROR(InSource(*s->cfg, s->src->CheckChangeCapture(info)));
      }
      // A marker that cannot be read would stop the sync: report it now.
      auto m = (*dst)->ReadMarker(info.name);
      if (!m.ok()) return m.status();
      const std::string table = (*dst)->TableName(info.name);
      auto first = first_of_table.emplace(table, std::make_pair(s->cfg, &info));
      if (!first.second) {
        FERRY_RETURN_IF_ERROR(CheckSameTable(table, *first.first->second.first,
                                             *first.first->second.second, *s->cfg, info));
      }
      report->tables.push_back(table);
      report->modes.push_back(std::string(config::SyncModeName(sc.mode)));
      source::StreamInfo shown = info;
      shown.name = SourceLabel(*s->cfg, info.name);
      report->streams.push_back(std::move(shown));
    }
  }
  auto st = state::OpenFileStateStore(cfg.state_path)->Load();
  if (!st.ok()) return st.status();
  if (*st && (*st)->pipeline() != cfg.name) {
    return Status::InvalidArgument("state file " + cfg.state_path + " belongs to pipeline '" +
                                   (*st)->pipeline() + "', not '" + cfg.name +
                                   "'; give this pipeline its own state file");
  }
  return Status::OK();
}

Status RunSync(config::PipelineConfig& cfg, const SyncOptions& opts, SyncReport* report) {
  auto t0 = Clock::now();
  FERRY_ASSIGN_OR_RETURN(auto sources, OpenSources(cfg, /*prepare_capture=*/true));
  auto dst_r = sink::Sink::Open(cfg.destination, cfg.name);
  if (!dst_r.ok()) return dst_r.status().WithContext("destination");
  auto dst = std::move(*dst_r);

  auto store = state::OpenFileStateStore(cfg.state_path);
  FERRY_ASSIGN_OR_RETURN(auto loaded, store->Load());
  if (loaded && loaded->pipeline() != cfg.name) {
    return Status::InvalidArgument("state file " + cfg.state_path + " belongs to pipeline '" +
                                   loaded->pipeline() + "', not '" + cfg.name +
                                   "'; give this pipeline its own state file");
  }
  Recorder recorder(store.get(), loaded ? std::move(*loaded) : state::PipelineState(cfg.name));

  // Every stream of every source, grouped by destination table (in the order tables first
  // appear); several sources' streams of one table are merged into it.
  std::vector<std::unique_ptr<StreamTask>> tasks;
  std::vector<std::unique_ptr<TableTask>> tables;
  std::map<std::string, TableTask*> by_table;
  size_t total = 0;
  for (const auto& s : sources) total += s->streams.size();
  report->streams.resize(total);
  for (const auto& s : sources) {
    for (const auto& info : s->streams) {
      auto t = std::make_unique<StreamTask>();
      t->info = info;
      t->source = s.get();
      t->settings = StreamSettings(*s->cfg, info.name);
      t->label = SourceLabel(*s->cfg, info.name);
      t->state_ns = StateNamespace(*s->cfg, info);
      t->report = &report->streams[tasks.size()];
      t->report->stream = t->label;
      t->report->table = dst->TableName(info.name);
      t->start = Clock::now();
      TableTask*& table = by_table[t->report->table];
      if (table == nullptr) {
        tables.push_back(std::make_unique<TableTask>());
        table = tables.back().get();
        table->table = t->report->table;
        table->merged = cfg.merged();
      }
      for (StreamTask* other : table->parts) {
        FERRY_RETURN_IF_ERROR(CheckSameTable(table->table, *other->source->cfg, other->info,
                                             *t->source->cfg, t->info));
      }
      table->parts.push_back(t.get());
      tasks.push_back(std::move(t));
    }
  }

  for (const auto& s : sources) {
    FERRY_RETURN_IF_ERROR(InSource(*s->cfg, s->src->BeginSnapshot()));
  }
  // Compare state and marker for every stream before reading anything.
  for (auto& table : tables) {
    StreamTask* first = table->parts.front();
    Schema schema = first->info.ToSchema();
    // Merged: a column any source may leave NULL may be NULL in the table.
    for (StreamTask* t : table->parts) {
      Schema other = t->info.ToSchema();
      for (size_t i = 0; i < schema.fields.size(); ++i) {
        schema.fields[i].required = schema.fields[i].required && other.fields[i].required;
      }
    }
    auto out =
        dst->OpenStream(first->info.name, schema,
                        /*replacing=*/first->settings.mode == config::SyncMode::kFullRefresh);
    if (!out.ok()) return out.status();
    std::shared_ptr<sink::SinkStream> shared = std::move(*out);
    const Json marker = shared->Marker();
    for (StreamTask* t : table->parts) {
      t->out = shared;
      t->marker = PartOfMarker(marker, table->merged ? t->source->cfg->name : "");
    }
    FERRY_RETURN_IF_ERROR(PlanTable(table.get(), &recorder, cfg.state_path));
  }

  // The edges of one table: each part's source feeds an edge; a merged table's meet in an
  // AlignNode, whose output its sink reads.
  auto connect = [&](graph::Graph& g, TableTask* table, std::function<void()> recorded,
                     std::map<SourceRun*, std::vector<StreamTask*>>* feeds) {
    std::vector<std::shared_ptr<graph::Edge>> inputs;
    for (StreamTask* t : table->parts) {
      t->edge = g.AddEdge(opts.edge_capacity);
      t->start = Clock::now();
      inputs.push_back(t->edge);
      (*feeds)[t->source].push_back(t);
    }
    graph::AlignNode* align = nullptr;
    if (table->parts.size() > 1) {
      table->edge = g.AddEdge(opts.edge_capacity);
      graph::AlignOptions ao;
      ao.exactly_once = cfg.checkpoint.exactly_once;
      ao.keyed = table->parts.front()->keyed();
      ao.alignment_timeout_ms = cfg.checkpoint.alignment_timeout_ms;
      ao.max_concurrent = cfg.checkpoint.max_concurrent;
      ao.tolerable_failures = cfg.checkpoint.tolerable_failures;
      std::vector<StreamTask*> parts = table->parts;
      for (StreamTask* t : parts) ao.input_names.push_back(t->label);
      ao.request = [parts](size_t i) { parts[i]->source->checkpoint_wanted.store(true); };
      auto node =
          std::make_unique<graph::AlignNode>("align " + table->table, inputs, table->edge, ao);
      align = node.get();
      g.AddNode(std::move(node));
    } else {
      table->edge = inputs.front();
    }
    g.AddNode(std::make_unique<SinkNode>(table, &recorder, cfg.name, opts,
                                         cfg.checkpoint.timeout_ms, std::move(recorded), align));
  };

  // Loads, windows and per-table change logs: waves of `parallel_streams` tables, each source
  // reading its part of every table of the wave in table order (so that no two sources wait on
  // each other's barriers in opposite tables).
  std::vector<TableTask*> own, shared;
  for (auto& table : tables) {
    if (!table->active) continue;
    (table->parts.front()->shared_log ? shared : own).push_back(table.get());
  }
  Status result;
  size_t wave = std::max<size_t>(1, opts.parallel_streams);
  for (size_t start = 0; start < own.size() && result.ok(); start += wave) {
    graph::Graph g;
    std::map<SourceRun*, std::vector<StreamTask*>> feeds;
    for (size_t i = start; i < std::min(own.size(), start + wave); ++i) {
      connect(g, own[i], nullptr, &feeds);
    }
    for (const auto& s : sources) {
      auto it = feeds.find(s.get());
      if (it == feeds.end()) continue;
      g.AddNode(std::make_unique<SourceNode>(s->src.get(), it->second, opts, s->cfg->readers));
    }
    result = g.Run();
  }
  // The snapshots are over before the change logs are read: a long CDC round must not hold a
  // source's oldest snapshot (PostgreSQL: xmin) back.
  Status end;
  for (const auto& s : sources) {
    Status e = InSource(*s->cfg, s->src->EndSnapshot());
    if (end.ok()) end = e;
  }
  // The shared change logs: one reader per source, every cdc stream's sink at once. Each log
  // hears of every checkpoint once all its streams have it in the state file, not only at the
  // end of the read.
  if (result.ok() && end.ok() && !shared.empty()) {
    graph::Graph g;
    std::mutex confirm_mu;
    std::map<SourceRun*, std::vector<StreamTask*>> feeds;
    auto confirm = [&] {
      std::lock_guard<std::mutex> lock(confirm_mu);
      for (const auto& [s, parts] : feeds) {
        int64_t floor = SharedLogFloor(*s, &recorder, std::numeric_limits<int64_t>::max());
        if (floor > 0 && floor < std::numeric_limits<int64_t>::max()) {
          s->src->ConfirmSharedLog(floor);
        }
      }
    };
    for (TableTask* table : shared) connect(g, table, confirm, &feeds);
    for (const auto& s : sources) s->checkpoint_wanted.store(false);  // asked during the loads
    for (const auto& s : sources) {
      auto it = feeds.find(s.get());
      if (it == feeds.end()) continue;
      g.AddNode(std::make_unique<SharedLogSourceNode>(s->src.get(), it->second, opts,
                                                      cfg.checkpoint, &s->read));
    }
    result = g.Run();
    for (const auto& s : sources) {
      if (report->rerun.empty()) report->rerun = s->read.restart;
    }
    for (TableTask* table : shared) {
      for (StreamTask* t : table->parts) {
        t->report->action = t->commits > 0 ? "cdc: changes " + std::to_string(t->report_from) +
                                                 ".." + std::to_string(t->changes.position)
                                           : "cdc: no new changes";
      }
    }
  }
  report->seconds = SecondsSince(t0);
  if (!result.ok()) return result;
  FERRY_RETURN_IF_ERROR(end);
  // Every change up to these positions is in the table and in the state file: the sources may
  // forget them.
  for (const auto& s : sources) {
    for (const auto& [info, position] : s->to_acknowledge) {
      FERRY_RETURN_IF_ERROR(InSource(*s->cfg, s->src->AcknowledgeChanges(info, position)));
    }
    if (s->read.position > 0) {
      int64_t floor = SharedLogFloor(*s, &recorder, s->read.position);
      if (floor > 0) FERRY_RETURN_IF_ERROR(InSource(*s->cfg, s->src->AcknowledgeSharedLog(floor)));
    }
  }
  return Status::OK();
}

}  // namespace ferry::engine
