#include "ferry/engine/nodes.h"

#include <algorithm>
#include <limits>
#include <mutex>

#include "ferry/base/deadline.h"
#include "ferry/base/log.h"
#include "ferry/graph/ordered_reads.h"

namespace ferry::engine {
namespace {

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
    // A load's batches go through the stream's transforms: on the reader threads when several
    // read at once (the work spreads over them), else on this thread, beside the one reader.
    const bool in_readers = t->transform && readers_.size() > 1;
    std::mutex error_mu;
    Status transform_error;
    auto transformed = [&](std::unique_ptr<Batch> in) -> std::unique_ptr<Batch> {
      auto out = Transformed(*t, *in, /*deletes=*/false, /*removed=*/nullptr);
      if (out.ok()) return std::move(*out);
      std::lock_guard<std::mutex> lock(error_mu);
      if (transform_error.ok()) transform_error = out.status();
      return nullptr;
    };
    graph::PartReader read = [&](size_t r, size_t k, const auto& emit) {
      return readers_[r]->ReadChunk(t->read_info(), t->progress.plan.At(pending[k]),
                                    t->read_schema(), opts_.batch_rows, [&](Batch& b) {
                                      auto owned = std::make_unique<Batch>(t->read_schema());
                                      std::swap(*owned, b);
                                      if (in_readers) {
                                        owned = transformed(std::move(owned));
                                        if (!owned) return false;
                                        if (owned->num_rows() == 0) return true;
                                      }
                                      return emit(std::move(owned));
                                    });
    };
    auto hand = [&](std::unique_ptr<Batch> b) {
      if (opts_.stop && opts_.stop->requested()) return false;
      if (t->transform && !in_readers) {
        b = transformed(std::move(b));
        if (!b) return false;
        if (b->num_rows() == 0) return true;
      }
      CountRows(t, *b);
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
    {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!transform_error.ok()) return transform_error;
    }
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
      auto read =
          ReadWindow(src_, t->read_info(), t->window.cursor_column, t->bounds, t->read_schema(),
                     opts_.batch_rows, static_cast<size_t>(t->settings.tie_rows),
                     [&](Batch& b) { return Forward(t, b, false); });
      if (!forward_error_.ok()) return forward_error_;
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
      Status s =
          src_->ReadChanges(t->read_info(), c.from, c.position, t->read_schema(), opts_.batch_rows,
                            [&](Batch& b, bool deletes) { return Forward(t, b, deletes); });
      if (!forward_error_.ok()) return forward_error_;
      if (!s.ok()) {
        if (opts_.stop && opts_.stop->requested()) return Status::Cancelled("stop requested");
        return s;
      }
      graph::Barrier barrier{graph::CheckpointId(1), t->info.name,
                             Json{{"position", c.position.ToJson()}}};
      if (!t->edge->Send(graph::Message::MakeBarrier(std::move(barrier)))) {
        return Status::Cancelled("sink stopped");
      }
    }
    if (!t->edge->Send(graph::Message::End())) return Status::Cancelled("sink stopped");
    return Status::OK();
  }

  bool Forward(StreamTask* t, Batch& b, bool deletes = false) {
    return engine::Forward(t, b, deletes, opts_, &forward_error_);
  }

  source::Source* src_;
  std::vector<StreamTask*> tasks_;
  const SyncOptions& opts_;
  int max_readers_;
  std::vector<source::Source*> readers_;  // readers_[0] is src_
  std::vector<std::unique_ptr<source::Source>> owned_readers_;
  bool readers_closed_ = false;  // no further reader can open
  Status forward_error_;         // a transform's, which stopped a read
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
      // A log that decodes some columns only is given the stream's; others decode every one.
      const bool chosen = src_->SharedLogSelectsColumns();
      streams.push_back({chosen ? &t->read_info() : &t->info,
                         chosen ? t->read_schema() : t->change_schema(), t->changes.from,
                         t->changes.table_id, t->changes.table_since});
    }
    Status forward_error;
    auto emit = [&](size_t i, Batch& b, bool deletes) {
      return Forward(tasks_[i], b, deletes, opts_, &forward_error);
    };
    int64_t checkpoints = 0;
    Coordinator* coordinator = &tasks_.front()->source->coordinator;
    auto checkpoint = [&](source::Position position, const std::vector<std::string>& table_ids) {
      ++checkpoints;
      coordinator->Checkpointed(position);
      for (size_t i = 0; i < tasks_.size(); ++i) {
        StreamTask* t = tasks_[i];
        Json at{{"position", position.ToJson()}};
        if (i < table_ids.size() && !table_ids[i].empty()) at["table_id"] = table_ids[i];
        graph::Barrier barrier{graph::CheckpointId(checkpoints), t->info.name, std::move(at)};
        if (!t->edge->Send(graph::Message::MakeBarrier(std::move(barrier)))) return false;
      }
      return true;
    };
    source::Source::SharedReadOptions read;
    read.batch_rows = opts_.batch_rows;
    read.memory_limit = static_cast<size_t>(opts_.memory_limit);
    read.spill_dir = opts_.spill_dir;
    coordinator->Start(policy_, opts_.follow, opts_.follow_commit_ms);
    read.trigger = coordinator;
    read.follow = opts_.follow;
    if (opts_.follow) {
      read.stopping = [this] { return opts_.stop && opts_.stop->requested(); };
    }
    auto r = src_->ReadSharedChanges(streams, read, emit, checkpoint);
    if (!forward_error.ok()) return forward_error;
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
        counted_(table->parts.size(), 0),
        waiting_(table->parts.size()) {}
  std::string name() const override { return "sink " + table_->table; }

  Status Run() override {
    Status s = Loop();
    if (!s.ok()) out_->DiscardPending();
    CountAbandonedAlignments();
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
          CountAbandonedAlignments();
          Status s;
          if (incremental()) {
            s = CommitWindows(at);
          } else if (keyed()) {
            s = CommitChanges(at);
          } else {
            s = CommitChunks(at);
          }
          if (!s.ok()) {
            Count(abandoned_ ? metrics::Checkpoint::kAbandoned : metrics::Checkpoint::kFailed);
            return s;
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
          Status s;
          if (out_->HasPending()) {
            s = CommitChunks(std::vector<std::vector<Json>>(parts()), true);
          }
          if (s.ok()) s = Publish();
          if (!s.ok()) {
            Count(abandoned_ ? metrics::Checkpoint::kAbandoned : metrics::Checkpoint::kFailed);
          }
          return s;
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
    for (size_t i = 0; i < parts(); ++i) m["sources"][part(i).marker_part] = markers[i];
    return m;
  }
  // How part i's source writes change-log positions (its records are read so).
  source::Position::Kind Kind(size_t i) { return part(i).source->src->position_kind(); }
  Json PartMarker(const Json& table_marker, size_t i) {
    return PartOfMarker(table_marker, table_->merged ? part(i).marker_part : "");
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
          if (!ChunkLanded(PartMarker(m, i), run(), p["chunk"].get<int64_t>(), Kind(i))) {
            return false;
          }
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
      part(i).chunks_landed.store(next[i].committed.Count());
      if (part(i).series.load_chunks_committed != nullptr) {
        part(i).series.load_chunks_committed->Set(static_cast<double>(next[i].committed.Count()));
      }
      rows_[i] = 0;
    }
    FERRY_RETURN_IF_ERROR(Record({}, [](StreamTask& t) { return t.progress.ToJson(); }));
    Landed();
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
        if (!LoadPublished(PartMarker(m, i), run(), Kind(i))) return false;
      }
      return true;
    };
    auto r = Timed([&] { return out_->Publish(run(), TableMarker(markers), landed); });
    if (!r.ok()) return r.status().WithContext("publishing the load of " + table_->table);
    for (size_t i = 0; i < parts(); ++i) part(i).progress = done[i];
    FERRY_RETURN_IF_ERROR(Record({}, [](StreamTask& t) { return t.progress.ToJson(); }));
    Landed();
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
        if (!WindowLanded(PartMarker(m, i), part(i).window.window)) return false;
      }
      return true;
    };
    std::map<std::string, std::string> summary = {{"ferry.pipeline", pipeline_},
                                                  {"ferry.window", Join(windows)}};
    auto r = Timed([&] { return out_->Commit("", TableMarker(markers), summary, landed); });
    if (!r.ok()) return r.status().WithContext("committing window " + Join(windows));
    for (size_t i : in) part(i).marker = markers[i];
    FERRY_RETURN_IF_ERROR(Record(in, [](StreamTask& t) { return t.window.ToJson(); }));
    Landed();
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
      auto reached = source::Position::FromJson(at[i].back()["position"], Kind(i), "position");
      if (!reached.ok()) return reached.status().WithContext("a checkpoint of " + part(i).label);
      c.position = std::max(*reached, c.from);
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
        Count(metrics::Checkpoint::kStarted);
        FERRY_RETURN_IF_ERROR(Record(in, [](StreamTask& t) { return t.changes.ToJson(); }));
        if (changes_recorded_) changes_recorded_();
      }
      if (moved) Landed();
      done();
      return Status::OK();
    }
    std::vector<Json> markers(parts());
    std::vector<std::string> positions;
    for (size_t i = 0; i < parts(); ++i) markers[i] = part(i).marker;
    for (size_t i : in) {
      part(i).changes.landed = true;
      markers[i] = part(i).changes.ToJson();
      positions.push_back((table_->merged ? part(i).marker_part + ":" : std::string()) +
                          part(i).changes.position.ToString());
    }
    auto landed = [&](const Json& m) {
      for (size_t i : in) {
        if (!ChangesLanded(PartMarker(m, i), part(i).changes.position, Kind(i))) return false;
      }
      return true;
    };
    std::map<std::string, std::string> summary = {{"ferry.pipeline", pipeline_},
                                                  {"ferry.position", Join(positions)}};
    auto r = Timed([&] { return out_->Commit("", TableMarker(markers), summary, landed); });
    if (!r.ok()) return r.status().WithContext("committing changes up to " + Join(positions));
    for (size_t i : in) part(i).marker = markers[i];
    FERRY_RETURN_IF_ERROR(Record(in, [](StreamTask& t) { return t.changes.ToJson(); }));
    Landed();
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
    const auto started = Clock::now();
    Count(metrics::Checkpoint::kStarted);
    bool interrupted = RunWithDeadline(
        timeout_ms_, [&] { r = commit(); },
        [&] {
          FERRY_LOG(kWarn) << table_->table << ": the commit has run for "
                           << FormatSeconds(timeout_ms_)
                           << " (checkpoint.timeout); interrupting it";
          out_->Interrupt();
        });
    if (table_->series.commit_seconds != nullptr) {
      table_->series.commit_seconds->Observe(SecondsSince(started));
    }
    if (!interrupted || r.ok()) return r;
    abandoned_ = true;
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

  void Count(metrics::Checkpoint outcome) {
    if (table_->series.commit_seconds != nullptr) table_->series.Count(outcome);
  }

  // A checkpoint is committed and in the state file: its rows and bytes count as committed.
  void Landed() {
    if (table_->series.commit_seconds == nullptr) return;
    Count(metrics::Checkpoint::kCompleted);
    table_->series.last_checkpoint->Set(metrics::UnixNow());
    metrics::Metrics::Get().NoteCheckpoint();
    const uint64_t bytes = out_->totals().bytes;
    table_->series.bytes_committed->Increment(static_cast<double>(bytes - bytes_counted_));
    bytes_counted_ = bytes;
    for (size_t i = 0; i < parts(); ++i) {
      if (part(i).series.rows_committed == nullptr || written_[i] == counted_[i]) continue;
      // A load's rows wait with chunks whose commit is deferred: they count once committed.
      if (!keyed() && rows_[i] != 0) continue;
      part(i).series.rows_committed->Increment(static_cast<double>(written_[i] - counted_[i]));
      counted_[i] = written_[i];
    }
  }

  // Alignments of a merged table that timed out (graph::AlignNode counts them).
  void CountAbandonedAlignments() {
    if (align_ == nullptr) return;
    const int64_t n = align_->abandoned();
    for (; abandoned_alignments_ < n; ++abandoned_alignments_) {
      Count(metrics::Checkpoint::kAbandoned);
    }
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
  std::vector<uint64_t> counted_;  // per part: of those, counted as committed in metrics
  uint64_t bytes_counted_ = 0;     // the sink's bytes counted as committed
  bool abandoned_ = false;         // a commit ran past checkpoint.timeout
  int64_t abandoned_alignments_ = 0;
  // per part: the barriers of chunks not committed yet (see CommitChunks)
  std::vector<std::vector<Json>> waiting_;
};

}  // namespace

std::unique_ptr<graph::Node> MakeSourceNode(source::Source* src, std::vector<StreamTask*> tasks,
                                            const SyncOptions& opts, int readers) {
  return std::make_unique<SourceNode>(src, std::move(tasks), opts, readers);
}

std::unique_ptr<graph::Node> MakeSharedLogSourceNode(source::Source* src,
                                                     std::vector<StreamTask*> tasks,
                                                     const SyncOptions& opts,
                                                     const config::CheckpointConfig& policy,
                                                     source::Source::SharedRead* result) {
  return std::make_unique<SharedLogSourceNode>(src, std::move(tasks), opts, policy, result);
}

std::unique_ptr<graph::Node> MakeSinkNode(TableTask* table, Recorder* recorder,
                                          const std::string& pipeline, const SyncOptions& opts,
                                          int64_t timeout_ms,
                                          std::function<void()> changes_recorded,
                                          graph::AlignNode* align) {
  return std::make_unique<SinkNode>(table, recorder, pipeline, opts, timeout_ms,
                                    std::move(changes_recorded), align);
}

}  // namespace ferry::engine
