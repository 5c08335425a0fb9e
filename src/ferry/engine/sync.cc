// The pipeline's wiring: a sync opens its sources and destination, plans every table
// (planning.h), then runs the graphs (nodes.h): the loads, windows and per-stream change logs in
// waves of tables, then each source's shared change log; and acknowledges what landed.
#include "ferry/engine/sync.h"

#include <algorithm>

#include "ferry/base/log.h"

#include "ferry/engine/ticker.h"
#include "ferry/engine/watch.h"
#include "ferry/source/change_spill.h"

#include <limits>
#include <map>
#include <mutex>

#include "ferry/engine/nodes.h"
#include "ferry/engine/planning.h"
#include "ferry/engine/tasks.h"
#include "ferry/graph/align.h"

namespace ferry::engine {

Status RunSync(config::PipelineConfig& cfg, const SyncOptions& options, SyncReport* report) {
  auto t0 = Clock::now();
  // The sync stops on the caller's request, or on an alarm that stops it (LogWatcher).
  graph::StopFlag stop(options.stop);
  SyncOptions opts = options;
  opts.stop = &stop;
  opts.memory_limit = cfg.memory_limit;
  opts.spill_dir = cfg.temp_dir;
  // Spill files of syncs that crashed are not needed by anyone.
  if (int n = source::ChangeSpill::RemoveLeftovers(cfg.temp_dir); n > 0) {
    FERRY_LOG(kInfo) << "removed " << n << " spill file(s) a crashed sync left in " << cfg.temp_dir;
  }
  FERRY_ASSIGN_OR_RETURN(auto sources, OpenSources(cfg, /*prepare_capture=*/true));
  metrics::Metrics& m = metrics::Metrics::Get();
  for (const auto& s : sources) {
    s->label = s->cfg->name.empty() ? s->cfg->type : s->cfg->name;
    s->coordinator.SetSeries(m.Source(cfg.name, s->label));
  }
  auto dst_r = sink::Sink::Open(cfg.destination, cfg.name);
  if (!dst_r.ok()) return dst_r.status().WithContext("destination");
  auto dst = std::move(*dst_r);
  report->connected = true;

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
    for (size_t i = 0; i < s->streams.size(); ++i) {
      const source::StreamInfo& info = s->streams[i];
      auto t = std::make_unique<StreamTask>();
      t->info = info;
      t->source = s.get();
      t->settings = StreamSettings(*s->cfg, info.name);
      t->transform = s->transforms[i];
      t->destination = s->destinations[i];
      t->label = SourceLabel(*s->cfg, info.name);
      t->state_ns = StateNamespace(*s->cfg, info);
      t->report = &report->streams[tasks.size()];
      t->report->stream = t->label;
      t->report->table = dst->TableName(t->destination);
      t->series = m.Stream(cfg.name, s->label, info.name, t->report->table);
      t->start = Clock::now();
      TableTask*& table = by_table[t->report->table];
      // Tables merge when streams name the same destination table (routes, several sources),
      // never because the destination's names of two tables meet (Kafka's topic names).
      if (table != nullptr) {
        FERRY_RETURN_IF_ERROR(CheckDistinctTables(
            t->report->table, table->parts.front()->destination, t->destination, dst->Describe()));
      }
      if (table == nullptr) {
        tables.push_back(std::make_unique<TableTask>());
        table = tables.back().get();
        table->table = t->report->table;
        table->series = m.Table(cfg.name, table->table);
      }
      for (StreamTask* other : table->parts) {
        FERRY_RETURN_IF_ERROR(CheckSameTable(table->table, *other->source->cfg, other->info,
                                             DestinationSchema(other->transform.get(), other->info),
                                             *t->source->cfg, t->info,
                                             DestinationSchema(t->transform.get(), t->info)));
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
    Schema schema = DestinationSchema(first->transform.get(), first->info);
    // Merged: a column any source may leave NULL may be NULL in the table.
    for (StreamTask* t : table->parts) {
      Schema other = DestinationSchema(t->transform.get(), t->info);
      for (size_t i = 0; i < schema.fields.size(); ++i) {
        schema.fields[i].required = schema.fields[i].required && other.fields[i].required;
      }
    }
    FERRY_RETURN_IF_ERROR(dst->SetPartitioning(
        first->destination, first->settings.partition_by ? first->settings.partition_by
                                                         : cfg.destination.partition_by));
    auto out =
        dst->OpenStream(first->destination, schema,
                        /*replacing=*/first->settings.mode == config::SyncMode::kFullRefresh);
    if (!out.ok()) return out.status();
    std::shared_ptr<sink::SinkStream> shared = std::move(*out);
    const Json marker = shared->Marker();
    table->merged = cfg.merged() || table->parts.size() > 1;
    for (StreamTask* t : table->parts) {
      t->out = shared;
      const size_t of_source =
          std::count_if(table->parts.begin(), table->parts.end(),
                        [&](const StreamTask* o) { return o->source == t->source; });
      t->marker_part = MarkerPart(cfg, *t->source->cfg, t->info.name, of_source);
      t->marker = PartOfMarker(marker, t->marker_part);
    }
    FERRY_RETURN_IF_ERROR(PlanTable(table.get(), &recorder, cfg.state_path));
    for (StreamTask* t : table->parts) {
      if (t->incremental() || (t->cdc() && !t->cdc_backfill)) continue;
      t->series.load_chunks_planned->Set(static_cast<double>(t->progress.plan.count));
      t->series.load_chunks_committed->Set(static_cast<double>(t->progress.committed.Count()));
      t->series.load_rows_planned->Set(static_cast<double>(t->progress.plan.rows));
    }
  }
  // The shared change logs are looked at from connections of their own while the sync runs.
  std::vector<SourceRun*> logs;
  for (const auto& s : sources) {
    if (!s->src->SharedChangeLog()) continue;
    for (const auto& info : s->streams) {
      const config::SyncMode mode = StreamSettings(*s->cfg, info.name).mode;
      if (mode == config::SyncMode::kCdc || mode == config::SyncMode::kCdcOnly) {
        logs.push_back(s.get());
        break;
      }
    }
  }
  LogWatcher watcher(cfg, logs, &recorder, &stop);

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
      // A source's parts are read by one reader: they align as one input (graph/align.h).
      std::vector<SourceRun*> readers;
      for (StreamTask* t : parts) {
        ao.input_names.push_back(t->label);
        auto at = std::find(readers.begin(), readers.end(), t->source);
        ao.groups.push_back(static_cast<size_t>(at - readers.begin()));
        if (at == readers.end()) readers.push_back(t->source);
      }
      for (size_t g = 0; g < readers.size(); ++g) {
        std::vector<std::shared_ptr<graph::Edge>> edges;
        for (size_t i = 0; i < parts.size(); ++i) {
          if (ao.groups[i] == g) edges.push_back(inputs[i]);
        }
        if (edges.size() > 1) graph::GroupEdges(edges);
      }
      ao.request = [parts](size_t i) { parts[i]->source->coordinator.Request(); };
      auto node =
          std::make_unique<graph::AlignNode>("align " + table->table, inputs, table->edge, ao);
      align = node.get();
      g.AddNode(std::move(node));
    } else {
      table->edge = inputs.front();
    }
    g.AddNode(MakeSinkNode(table, &recorder, cfg.name, opts, cfg.checkpoint.timeout_ms,
                           std::move(recorded), align));
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
    std::vector<StreamTask*> loads;
    for (const auto& s : sources) {
      auto it = feeds.find(s.get());
      if (it == feeds.end()) continue;
      g.AddNode(MakeSourceNode(s->src.get(), it->second, opts, s->cfg->readers));
      loads.insert(loads.end(), it->second.begin(), it->second.end());
    }
    ProgressTicker ticker(loads, opts);
    result = g.Run();
    FERRY_LOG(kDebug) << "threads of the snapshot reads: " << g.DescribeTimes();
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
      for (const auto& [s, parts] : feeds) Coordinator::Confirm(*s, &recorder);
    };
    for (TableTask* table : shared) connect(g, table, confirm, &feeds);
    for (const auto& s : sources) s->coordinator.ClearRequests();  // asked during the loads
    for (const auto& s : sources) {
      auto it = feeds.find(s.get());
      if (it == feeds.end()) continue;
      g.AddNode(MakeSharedLogSourceNode(s->src.get(), it->second, opts, cfg.checkpoint, &s->read));
    }
    result = g.Run();
    FERRY_LOG(kDebug) << "threads of the change log reads: " << g.DescribeTimes();
    for (const auto& s : sources) {
      if (report->rerun.empty()) report->rerun = s->read.restart;
    }
    for (TableTask* table : shared) {
      for (StreamTask* t : table->parts) {
        t->report->action = t->commits > 0 ? "cdc: changes " + t->report_from.ToString() + ".." +
                                                 t->changes.position.ToString()
                                           : "cdc: no new changes";
      }
    }
  }
  report->seconds = SecondsSince(t0);
  // An alarm that stopped the sync is what the caller hears, not the stop it caused.
  FERRY_RETURN_IF_ERROR(watcher.error());
  if (!result.ok()) return result;
  FERRY_RETURN_IF_ERROR(end);
  // Every change up to these positions is in the table and in the state file: the sources may
  // forget them.
  for (const auto& s : sources) FERRY_RETURN_IF_ERROR(Coordinator::Acknowledge(*s, &recorder));
  return Status::OK();
}

}  // namespace ferry::engine
