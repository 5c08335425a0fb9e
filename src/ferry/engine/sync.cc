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
  Status Record(const std::string& ns, const std::string& stream, const Json& progress) {
    std::lock_guard<std::mutex> lock(mu_);
    state_.SetStream(ns, stream, progress);
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

// One stream's work in this sync.
struct StreamTask {
  source::StreamInfo info;
  config::StreamConfig settings;
  std::unique_ptr<sink::SinkStream> out;
  FullRefreshProgress progress;  // full refresh
  IncrementalProgress window;    // incremental: the window this sync reads (from, cursor = to)
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

  // One incremental window: the rows, then a barrier carrying the window's end.
  Status RunWindow(StreamTask* t) {
    if (!t->window.cursor.is_null()) {
      Status s = src_->ReadCursorRange(t->info, t->window.cursor_column, t->window.from,
                                       t->window.cursor, t->out->schema(), opts_.batch_rows,
                                       [&](Batch& b) { return Forward(t, b); });
      if (!s.ok()) {
        if (opts_.stop && opts_.stop->requested()) return Status::Cancelled("stop requested");
        return s;
      }
      graph::Barrier barrier{graph::CheckpointId(0), t->info.name,
                             Json{{"window", t->window.window}, {"cursor", t->window.cursor}}};
      if (!t->edge->Send(graph::Message::MakeBarrier(std::move(barrier)))) {
        return Status::Cancelled("sink stopped");
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
      streams.push_back({&t->info, t->out->schema(), t->changes.from});
    }
    auto emit = [&](size_t i, Batch& b, bool deletes) {
      return Forward(tasks_[i], b, deletes, opts_);
    };
    auto checkpoint = [&](int64_t position) {
      for (StreamTask* t : tasks_) {
        graph::Barrier barrier{graph::CheckpointId(position), t->info.name,
                               Json{{"position", position}}};
        if (!t->edge->Send(graph::Message::MakeBarrier(std::move(barrier)))) return false;
      }
      return true;
    };
    source::Source::SharedReadOptions read;
    read.batch_rows = opts_.batch_rows;
    read.policy = policy_;
    read.follow = opts_.follow;
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

class SinkNode : public graph::Node {
 public:
  // `changes_recorded`, when set, is called after each commit of changes is in the state file.
  SinkNode(StreamTask* task, Recorder* recorder, const std::string& pipeline,
           const SyncOptions& opts, int64_t timeout_ms,
           std::function<void()> changes_recorded = nullptr)
      : t_(task),
        recorder_(recorder),
        pipeline_(pipeline),
        opts_(opts),
        timeout_ms_(timeout_ms),
        changes_recorded_(std::move(changes_recorded)) {}
  std::string name() const override { return "sink " + t_->info.name; }

  Status Run() override {
    Status s = Loop();
    if (!s.ok()) t_->out->DiscardPending();
    return s;
  }

 private:
  Status Loop() {
    FullRefreshProgress& p = t_->progress;
    const std::string run = p.run;
    if (!t_->keyed()) {
      FERRY_RETURN_IF_ERROR(t_->out->StartLoad(run));
    }
    while (auto m = t_->edge->Receive()) {
      switch (m->kind) {
        case graph::Message::Kind::kBatch:
          if (m->deletes) {
            FERRY_RETURN_IF_ERROR(t_->out->WriteDeleteKeys(*m->batch));
          } else if (t_->keyed()) {
            FERRY_RETURN_IF_ERROR(t_->out->WriteUpserts(*m->batch));
          } else {
            FERRY_RETURN_IF_ERROR(t_->out->Write(*m->batch));
          }
          break;
        case graph::Message::Kind::kBarrier: {
          if (t_->incremental()) {
            FERRY_RETURN_IF_ERROR(CommitWindow());
            break;
          }
          if (t_->keyed()) {
            FERRY_RETURN_IF_ERROR(CommitChanges(m->barrier.position["position"].get<int64_t>()));
            break;
          }
          int64_t chunk = m->barrier.position["chunk"].get<int64_t>();
          FullRefreshProgress next = p;
          next.committed.Add(chunk);
          next.rows += static_cast<int64_t>(t_->out->pending_rows());
          auto landed = [&](const Json& m) { return ChunkLanded(m, run, chunk); };
          std::map<std::string, std::string> summary = {
              {"ferry.pipeline", pipeline_},
              {"ferry.run", run},
              {"ferry.chunk", m->barrier.position["id"].get<std::string>()}};
          auto r = Timed([&] { return t_->out->Commit(run, next.ToJson(), summary, landed); });
          if (!r.ok())
            return r.status().WithContext("committing " +
                                          m->barrier.position["id"].get<std::string>());
          p = next;
          FERRY_RETURN_IF_ERROR(recorder_->Record(t_->info.ns, t_->info.name, p.ToJson()));
          if (opts_.print_progress) {
            FERRY_LOG(kInfo) << t_->info.name << ": chunk " << p.committed.Count() << "/"
                             << p.plan.count << " committed (" << p.rows << " rows in this load)";
          }
          break;
        }
        case graph::Message::Kind::kEnd: {
          if (t_->keyed()) {
            Finish();
            return Status::OK();
          }
          FullRefreshProgress done = p;
          done.published = true;
          auto landed = [&](const Json& m) { return PublishLanded(m, run); };
          auto r = Timed([&] { return t_->out->Publish(run, done.ToJson(), landed); });
          if (!r.ok()) return r.status().WithContext("publishing the load of " + t_->info.name);
          p = done;
          FERRY_RETURN_IF_ERROR(recorder_->Record(t_->info.ns, t_->info.name, p.ToJson()));
          Finish();
          if (opts_.print_progress) {
            FERRY_LOG(kInfo) << t_->info.name << ": load published, " << p.rows << " rows";
          }
          return Status::OK();
        }
      }
    }
    return Status::Cancelled("the source stopped before the end of " + t_->info.name);
  }

  // Commits an incremental window: the upserted rows, their keys as equality deletes, and the
  // marker naming the window, in one snapshot; then the state takes the window's end.
  Status CommitWindow() {
    // A commit with rows (or one that writes the marker anyway) leaves the marker in the table.
    if (t_->out->HasPending() || t_->out->CheapMarkerCommits()) t_->window.landed = true;
    const IncrementalProgress& w = t_->window;
    auto landed = [&](const Json& j) {
      return j.is_object() && j.value("mode", "") == "incremental" &&
             j.value("window", "") == w.window;
    };
    std::map<std::string, std::string> summary = {{"ferry.pipeline", pipeline_},
                                                  {"ferry.window", w.window}};
    auto r = Timed([&] { return t_->out->Commit("", w.ToJson(), summary, landed); });
    if (!r.ok()) return r.status().WithContext("committing window " + w.window);
    FERRY_RETURN_IF_ERROR(recorder_->Record(t_->info.ns, t_->info.name, w.ToJson()));
    if (opts_.print_progress) {
      FERRY_LOG(kInfo) << t_->info.name << ": rows up to " << t_->info.name << "."
                       << w.cursor_column << " = " << w.cursor.dump() << " committed";
    }
    return Status::OK();
  }

  // Commits a batch of changes (upserts and deletes by key) with the stream's new position `to`.
  // A stream already past `to` (its marker was ahead) keeps its position.
  Status CommitChanges(int64_t to) {
    CdcProgress& c = t_->changes;
    c.position = std::max(to, c.from);
    if (!t_->out->HasPending() && !(t_->out->CheapMarkerCommits() && c.position > c.from)) {
      // Nothing of this stream in the checkpoint: only the state moves on.
      if (c.position > c.from) {
        FERRY_RETURN_IF_ERROR(recorder_->Record(t_->info.ns, t_->info.name, c.ToJson()));
        if (changes_recorded_) changes_recorded_();
      }
      c.from = c.position;
      return Status::OK();
    }
    auto landed = [&](const Json& j) {
      return j.is_object() && j.value("mode", "") == "cdc" &&
             j.value("position", int64_t{-1}) >= c.position;
    };
    c.landed = true;
    std::map<std::string, std::string> summary = {{"ferry.pipeline", pipeline_},
                                                  {"ferry.position", std::to_string(c.position)}};
    auto r = Timed([&] { return t_->out->Commit("", c.ToJson(), summary, landed); });
    if (!r.ok())
      return r.status().WithContext("committing changes up to " + std::to_string(c.position));
    FERRY_RETURN_IF_ERROR(recorder_->Record(t_->info.ns, t_->info.name, c.ToJson()));
    if (changes_recorded_) changes_recorded_();
    ++t_->commits;
    if (opts_.print_progress) {
      FERRY_LOG(kInfo) << t_->info.name << ": changes " << c.from << ".." << c.position
                       << " committed";
    }
    c.from = c.position;
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
          FERRY_LOG(kWarn) << t_->info.name << ": the commit has run for "
                           << FormatSeconds(timeout_ms_)
                           << " (checkpoint.timeout); interrupting it";
          t_->out->Interrupt();
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
    t_->report->seconds = SecondsSince(t_->start);
    t_->report->rows = t_->out->totals().rows;
    t_->report->files = t_->out->totals().files;
    t_->report->bytes = t_->out->totals().bytes;
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

  StreamTask* t_;
  Recorder* recorder_;
  std::string pipeline_;
  const SyncOptions& opts_;
  int64_t timeout_ms_;  // checkpoint.timeout
  std::function<void()> changes_recorded_;
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
Status PlanWindow(source::Source* src, StreamTask* t, const Json& state, const Json& marker,
                  Recorder* recorder) {
  const std::string& cursor = *t->settings.cursor;
  auto d = DecideIncremental(t->info.name, cursor, state, marker);
  if (!d.ok()) return d.status();
  FERRY_LOG(kInfo) << t->info.name << ": " << d->explanation;
  if (t->out->schema()->identifier_field_ids.empty()) {
    return Status::InvalidArgument(
        "stream " + t->info.name +
        ": incremental mode upserts by primary key, and the table has "
        "none (or a key column may be NULL); declare a NOT NULL primary key on the source table, "
        "set the stream's primary_key to NOT NULL columns, or use full_refresh");
  }
  if (d->state_behind) {
    FERRY_RETURN_IF_ERROR(recorder->Record(t->info.ns, t->info.name, d->start.ToJson()));
  }
  FERRY_ASSIGN_OR_RETURN(Json upper, src->MaxCursor(t->info, cursor));
  IncrementalProgress w = d->start;
  w.from = d->start.cursor;
  w.window = IncrementalProgress::WindowId(t->info.name, w.from);
  // Nothing new: no window (null cursor) and nothing to commit.
  // Numbers compare as numbers. Text cursors (numerics, timestamps, strings) are ordered by the
  // source, not by their spelling ("1000.5" < "29.99" as text): any other maximum opens a window,
  // and the source's own comparison in the read decides which rows it holds.
  bool nothing = upper.is_null() ||
                 (!w.from.is_null() &&
                  (w.from.is_number() && upper.is_number() ? !(w.from < upper) : w.from == upper));
  w.cursor = nothing ? Json(nullptr) : upper;
  t->window = w;
  t->report->action = nothing ? "incremental: nothing new" : "incremental up to " + upper.dump();
  return Status::OK();
}

}  // namespace

Result<std::vector<source::StreamInfo>> RunDiscover(config::PipelineConfig& cfg) {
  FERRY_ASSIGN_OR_RETURN(auto src, source::OpenSource(cfg.source()));
  return src->Discover();
}

Status RunStateReport(config::PipelineConfig& cfg, std::vector<StreamStateReport>* out) {
  FERRY_ASSIGN_OR_RETURN(auto src, source::OpenSource(cfg.source()));
  FERRY_ASSIGN_OR_RETURN(auto all, src->Discover());
  FERRY_ASSIGN_OR_RETURN(auto streams, SelectStreams(cfg.source(), std::move(all)));
  auto dst = sink::Sink::Open(cfg.destination, cfg.name);
  if (!dst.ok()) return dst.status().WithContext("destination");
  FERRY_ASSIGN_OR_RETURN(auto loaded, state::OpenFileStateStore(cfg.state_path)->Load());
  for (const auto& info : streams) {
    StreamStateReport r;
    r.stream = info.name;
    r.table = (*dst)->TableName(info.name);
    config::StreamConfig sc = StreamSettings(cfg.source(), info.name);
    r.mode = std::string(config::SyncModeName(sc.mode));
    r.state = loaded ? loaded->Stream(info.ns, info.name) : Json(nullptr);
    FERRY_ASSIGN_OR_RETURN(r.marker, (*dst)->ReadMarker(info.name));
    if (sc.mode == config::SyncMode::kCdc || sc.mode == config::SyncMode::kCdcOnly) {
      auto d = DecideCdc(r.state, r.marker, sc.mode == config::SyncMode::kCdc);
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
  return Status::OK();
}

Status RunCheck(config::PipelineConfig& cfg, CheckReport* report) {
  FERRY_ASSIGN_OR_RETURN(auto src, source::OpenSource(cfg.source()));
  FERRY_ASSIGN_OR_RETURN(auto all, src->Discover());
  FERRY_ASSIGN_OR_RETURN(report->streams, SelectStreams(cfg.source(), std::move(all)));
  auto dst = sink::Sink::Open(cfg.destination, cfg.name);
  if (!dst.ok()) return dst.status().WithContext("destination");
  report->source = src->Describe();
  report->destination = (*dst)->Describe();
  report->guarantee = (*dst)->Guarantee();
  for (const auto& s : report->streams) {
    report->tables.push_back((*dst)->TableName(s.name));
    config::StreamConfig sc = StreamSettings(cfg.source(), s.name);
    if (sc.mode == config::SyncMode::kCdc || sc.mode == config::SyncMode::kCdcOnly) {
      source::StreamInfo info = s;
      FERRY_RETURN_IF_ERROR(ApplyKeyOverride(sc, &info));
      FERRY_RETURN_IF_ERROR(src->CheckChangeCapture(info));
    }
    // A marker that cannot be read would stop the sync: report it now.
    auto m = (*dst)->ReadMarker(s.name);
    if (!m.ok()) return m.status();
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
  FERRY_ASSIGN_OR_RETURN(auto src, source::OpenSource(cfg.source()));
  FERRY_ASSIGN_OR_RETURN(auto all, src->Discover());
  FERRY_ASSIGN_OR_RETURN(auto streams, SelectStreams(cfg.source(), std::move(all)));
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

  // Compare state and marker for every stream before reading anything.
  std::vector<std::unique_ptr<StreamTask>> tasks;
  report->streams.resize(streams.size());
  // Change capture is installed before the snapshot point, so no later change is missed.
  for (auto& info : streams) {
    config::StreamConfig sc = StreamSettings(cfg.source(), info.name);
    FERRY_RETURN_IF_ERROR(ApplyKeyOverride(sc, &info));
    if (sc.mode == config::SyncMode::kCdc || sc.mode == config::SyncMode::kCdcOnly) {
      FERRY_RETURN_IF_ERROR(src->PrepareChangeCapture(info));
    }
  }
  FERRY_RETURN_IF_ERROR(src->BeginSnapshot());
  std::vector<std::pair<source::StreamInfo, int64_t>> to_acknowledge;
  for (size_t i = 0; i < streams.size(); ++i) {
    auto t = std::make_unique<StreamTask>();
    t->info = streams[i];
    t->report = &report->streams[i];
    t->report->stream = t->info.name;
    t->report->table = dst->TableName(t->info.name);
    t->start = Clock::now();
    t->settings = StreamSettings(cfg.source(), t->info.name);
    auto out = dst->OpenStream(t->info.name, t->info.ToSchema(),
                               /*replacing=*/t->settings.mode == config::SyncMode::kFullRefresh);
    if (!out.ok()) return out.status();
    t->out = std::move(*out);
    Json marker = t->out->Marker();
    Json st = recorder.Get(t->info.ns, t->info.name);
    if (t->incremental()) {
      FERRY_RETURN_IF_ERROR(PlanWindow(src.get(), t.get(), st, marker, &recorder));
      tasks.push_back(std::move(t));
      continue;
    }
    std::optional<Decision> backfill;
    if (t->cdc()) {
      auto decided = DecideCdc(st, marker, t->settings.mode == config::SyncMode::kCdc);
      if (!decided.ok()) {
        return decided.status().WithContext("stream " + t->info.name + " (table " +
                                            t->report->table + ")");
      }
      CdcDecision cd = std::move(*decided);
      if (!cd.backfill || t->settings.mode == config::SyncMode::kCdcOnly) {
        t->changes.stream = t->info.name;
        if (cd.backfill) {
          // cdc_only: no backfill; changes from now on.
          FERRY_ASSIGN_OR_RETURN(cd.position, src->ChangeLogEnd(t->info));
          cd.explanation =
              "cdc_only: applying changes after position " + std::to_string(cd.position);
          CdcProgress start{t->info.name, cd.position, cd.position};
          FERRY_RETURN_IF_ERROR(recorder.Record(t->info.ns, t->info.name, start.ToJson()));
        } else if (cd.state_behind) {
          CdcProgress repaired{t->info.name, cd.position, cd.position, /*landed=*/true};
          FERRY_RETURN_IF_ERROR(recorder.Record(t->info.ns, t->info.name, repaired.ToJson()));
        }
        t->changes.landed = marker.is_object() || (st.is_object() && st.value("landed", false));
        FERRY_LOG(kInfo) << t->info.name << ": " << cd.explanation;
        if (src->SharedChangeLog()) {
          // One pass over the shared log serves every such stream (see below).
          t->shared_log = true;
          t->changes.from = t->changes.position = cd.position;
          t->report_from = cd.position;
          t->report->action = "cdc: changes after position " + std::to_string(cd.position);
          tasks.push_back(std::move(t));
          continue;
        }
        FERRY_ASSIGN_OR_RETURN(int64_t end, src->ChangeLogEnd(t->info));
        t->changes.from = cd.position;
        t->changes.position = std::max(cd.position, end);
        to_acknowledge.emplace_back(t->info, t->changes.position);
        t->report->action = t->changes.position > t->changes.from
                                ? "cdc: changes " + std::to_string(t->changes.from) + ".." +
                                      std::to_string(t->changes.position)
                                : "cdc: no new changes";
        tasks.push_back(std::move(t));
        continue;
      }
      t->cdc_backfill = true;
      backfill = cd.full;
    }
    auto decision = backfill ? Result<Decision>(*backfill) : DecideFullRefresh(st, marker);
    if (!decision.ok()) {
      return decision.status().WithContext("stream " + t->info.name + " (state file " +
                                           cfg.state_path + ")");
    }
    FERRY_LOG(kInfo) << t->info.name << ": " << decision->explanation;
    t->report->action = ActionName(decision->action);
    if (decision->action == Action::kAlreadyPublished) {
      FERRY_RETURN_IF_ERROR(recorder.Record(t->info.ns, t->info.name, decision->progress.ToJson()));
      t->report->chunks_total = decision->progress.plan.count;
      t->report->chunks_skipped = decision->progress.plan.count;
      continue;
    }
    if (decision->action == Action::kResume) {
      FERRY_ASSIGN_OR_RETURN(std::string stale, src->StalePlan(t->info, decision->progress.plan));
      if (!stale.empty()) {
        FERRY_LOG(kWarn) << t->info.name << ": the unfinished load cannot resume (" << stale
                         << "); a new load starts, and replaces the table when published";
        decision->action = Action::kStartNewRun;
        t->report->action = ActionName(decision->action);
      }
    }
    if (decision->action == Action::kStartNewRun) {
      FullRefreshProgress p;
      p.stream = t->info.name;
      p.run = NewRunId();
      FERRY_ASSIGN_OR_RETURN(p.plan, src->PlanChunks(t->info, t->settings.chunk_rows));
      if (t->cdc_backfill) {
        // Changes after this point are applied once the load is published.
        FERRY_ASSIGN_OR_RETURN(int64_t start, src->ChangeLogEnd(t->info));
        p.cdc_start = start;
      }
      // The plan is durable before the first commit, so a crash resumes this very load.
      FERRY_RETURN_IF_ERROR(recorder.Record(t->info.ns, t->info.name, p.ToJson()));
      t->progress = std::move(p);
    } else {
      t->progress = decision->progress;
      t->progress.stream = t->info.name;
      if (decision->state_behind) {
        FERRY_RETURN_IF_ERROR(recorder.Record(t->info.ns, t->info.name, t->progress.ToJson()));
      }
    }
    t->report->chunks_total = t->progress.plan.count;
    t->report->chunks_skipped = t->progress.committed.Count();
    tasks.push_back(std::move(t));
  }

  // Run the graph in waves of `parallel_streams` sinks fed by one source node.
  std::vector<StreamTask*> own, shared;
  for (auto& t : tasks) (t->shared_log ? shared : own).push_back(t.get());
  Status result;
  size_t wave = std::max<size_t>(1, opts.parallel_streams);
  for (size_t start = 0; start < own.size() && result.ok(); start += wave) {
    graph::Graph g;
    std::vector<StreamTask*> group;
    for (size_t i = start; i < std::min(own.size(), start + wave); ++i) {
      StreamTask* t = own[i];
      t->edge = g.AddEdge(opts.edge_capacity);
      t->start = Clock::now();
      group.push_back(t);
      g.AddNode(
          std::make_unique<SinkNode>(t, &recorder, cfg.name, opts, cfg.checkpoint.timeout_ms));
    }
    g.AddNode(std::make_unique<SourceNode>(src.get(), group, opts, cfg.source().readers));
    result = g.Run();
  }
  // The snapshot is over before the change log is read: a long CDC round must not hold the
  // source's oldest snapshot (PostgreSQL: xmin) back.
  Status end = src->EndSnapshot();
  // How far the shared change log may be forgotten: up to what EVERY cdc stream of the pipeline
  // has in its table and in the state file, including backfills still in flight (their changes
  // start at cdc_start); 0 while a stream has no position yet.
  auto shared_log_floor = [&](int64_t upper) {
    int64_t floor = upper;
    for (const auto& info : streams) {
      config::StreamConfig sc = StreamSettings(cfg.source(), info.name);
      if (sc.mode != config::SyncMode::kCdc && sc.mode != config::SyncMode::kCdcOnly) continue;
      Json st = recorder.Get(info.ns, info.name);
      if (st.is_object() && st.value("mode", "") == "cdc") {
        floor = std::min(floor, st.value("position", int64_t{0}));
      } else if (st.is_object() && st.contains("cdc_start")) {
        floor = std::min(floor, st.value("cdc_start", int64_t{0}));
      } else {
        return int64_t{0};
      }
    }
    return floor;
  };
  // The shared change log: one reader, every cdc stream's sink at once. The log hears of every
  // checkpoint once all streams have it in the state file, not only at the end of the read.
  source::Source::SharedRead read;
  if (result.ok() && end.ok() && !shared.empty()) {
    graph::Graph g;
    std::mutex confirm_mu;
    auto confirm = [&] {
      std::lock_guard<std::mutex> lock(confirm_mu);
      int64_t floor = shared_log_floor(std::numeric_limits<int64_t>::max());
      if (floor > 0 && floor < std::numeric_limits<int64_t>::max()) src->ConfirmSharedLog(floor);
    };
    for (StreamTask* t : shared) {
      t->edge = g.AddEdge(opts.edge_capacity);
      t->start = Clock::now();
      g.AddNode(std::make_unique<SinkNode>(t, &recorder, cfg.name, opts, cfg.checkpoint.timeout_ms,
                                           confirm));
    }
    g.AddNode(
        std::make_unique<SharedLogSourceNode>(src.get(), shared, opts, cfg.checkpoint, &read));
    result = g.Run();
    report->rerun = read.restart;
    for (StreamTask* t : shared) {
      t->report->action = t->commits > 0 ? "cdc: changes " + std::to_string(t->report_from) + ".." +
                                               std::to_string(t->changes.position)
                                         : "cdc: no new changes";
    }
  }
  report->seconds = SecondsSince(t0);
  if (!result.ok()) return result;
  FERRY_RETURN_IF_ERROR(end);
  // Every change up to these positions is in the table and in the state file: the source may
  // forget them.
  for (const auto& [info, position] : to_acknowledge) {
    FERRY_RETURN_IF_ERROR(src->AcknowledgeChanges(info, position));
  }
  if (read.position > 0) {
    int64_t floor = shared_log_floor(read.position);
    if (floor > 0) FERRY_RETURN_IF_ERROR(src->AcknowledgeSharedLog(floor));
  }
  return Status::OK();
}

}  // namespace ferry::engine
