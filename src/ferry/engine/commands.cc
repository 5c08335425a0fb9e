// The commands that read a pipeline without syncing it: discover, state, check.
#include <algorithm>

#include "ferry/base/log.h"
#include "ferry/engine/sync.h"
#include "ferry/engine/tasks.h"

namespace ferry::engine {

namespace {

// How the rows of a table merged with `first` meet: by a key that names their source, or by a
// key two sources may both hold.
std::string MergedKeyNote(const std::string& first, const Schema& schema) {
  std::string key;
  bool by_source = false;
  for (int32_t id : schema.identifier_field_ids) {
    const Field* f = schema.FindById(id);
    if (f == nullptr) continue;
    key += (key.empty() ? "" : ", ") + f->name;
    by_source = by_source || f->name == "_ferry_source_table";
  }
  if (key.empty()) return "with " + first + ", no key: rows of every source are appended";
  if (by_source) return "with " + first + ", by key (" + key + "): each source's rows kept apart";
  return "with " + first + ", by key (" + key +
         "): the sources' keys must not collide (a load keeps both rows of a key two sources "
         "hold, and a change to either replaces both); if they may, set metadata_columns: "
         "[_ferry_source_table] on them to keep their rows apart";
}

}  // namespace

Result<DiscoverReport> RunDiscover(config::PipelineConfig& cfg) {
  DiscoverReport out;
  for (config::SourceConfig& sc : cfg.sources) {
    auto src = source::OpenSource(sc);
    if (!src.ok()) return InSource(sc, src.status());
    auto streams = (*src)->Discover();
    if (!streams.ok()) return InSource(sc, streams.status());
    for (auto& info : *streams) {
      const config::StreamConfig settings = StreamSettings(sc, info.name);
      // The table as the destination would get it: the stream's transforms applied.
      auto transform = TransformOf(sc, settings, info);
      // What keeps it from syncing: the table, the columns it reads, its transforms.
      info.error =
          transform.ok() && *transform ? (*transform)->read_info().Problem() : info.Problem();
      if (!transform.ok() && info.error.empty()) info.error = transform.status().message();
      const Schema schema = DestinationSchema(transform.ok() ? transform->get() : nullptr, info);
      auto parts = sink::Sink::DescribePartitionTerms(
          cfg.destination, DestinationName(sc, settings, info),
          settings.partition_by ? settings.partition_by : cfg.destination.partition_by, schema);
      out.partitioning.push_back(parts.ok() ? *parts : parts.status().message());
      out.destinations.push_back(DestinationName(sc, settings, info));
      out.transforms.push_back(transform.ok() && *transform ? (*transform)->Describe() : "");
      if (!parts.ok() && info.error.empty()) info.error = parts.status().message();
      info.name = SourceLabel(sc, info.name);
      out.streams.push_back(std::move(info));
    }
  }
  return out;
}

Status RunStateReport(config::PipelineConfig& cfg, std::vector<StreamStateReport>* out) {
  FERRY_ASSIGN_OR_RETURN(auto sources, OpenSources(cfg, /*prepare_capture=*/false));
  auto dst = sink::Sink::Open(cfg.destination, cfg.name);
  if (!dst.ok()) return dst.status().WithContext("destination");
  FERRY_ASSIGN_OR_RETURN(auto loaded, state::OpenFileStateStore(cfg.state_path)->Load());
  // How many streams of each source each table merges (MarkerPart).
  std::map<std::pair<const SourceRun*, std::string>, size_t> of_source;
  for (const auto& s : sources) {
    for (const auto& d : s->destinations) ++of_source[{s.get(), (*dst)->TableName(d)}];
  }
  for (const auto& s : sources) {
    for (size_t i = 0; i < s->streams.size(); ++i) {
      const source::StreamInfo& info = s->streams[i];
      StreamStateReport r;
      r.stream = SourceLabel(*s->cfg, info.name);
      r.table = (*dst)->TableName(s->destinations[i]);
      config::StreamConfig sc = StreamSettings(*s->cfg, info.name);
      r.mode = std::string(config::SyncModeName(sc.mode));
      r.position_kind = s->src->position_kind();
      r.state = loaded ? loaded->Stream(StateNamespace(*s->cfg, info), info.name) : Json(nullptr);
      FERRY_ASSIGN_OR_RETURN(Json marker, (*dst)->ReadMarker(s->destinations[i]));
      r.marker =
          PartOfMarker(marker, MarkerPart(cfg, *s->cfg, info.name, of_source[{s.get(), r.table}]));
      if (sc.mode == config::SyncMode::kCdc || sc.mode == config::SyncMode::kCdcOnly) {
        auto d = DecideCdc(r.state, r.marker, sc.mode == config::SyncMode::kCdc,
                           s->src->position_kind(), info.table_id);
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
        auto d = DecideFullRefresh(r.state, r.marker, s->src->position_kind());
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
  FERRY_RETURN_IF_ERROR((*dst)->ProbeStorage().WithContext("destination"));
  report->destination = (*dst)->Describe();
  report->guarantee = (*dst)->Guarantee();
  if (cfg.merged()) {
    report->guarantee += cfg.checkpoint.exactly_once
                             ? "; tables fed by several sources: exactly-once (barriers aligned)"
                             : "; tables fed by several sources: at-least-once (checkpoint.mode "
                               "at_least_once: a restart may apply some rows twice)";
  }
  auto st = state::OpenFileStateStore(cfg.state_path)->Load();
  if (!st.ok()) return st.status();
  if (*st && (*st)->pipeline() != cfg.name) {
    return Status::InvalidArgument("state file " + cfg.state_path + " belongs to pipeline '" +
                                   (*st)->pipeline() + "', not '" + cfg.name +
                                   "'; give this pipeline its own state file");
  }
  // The first stream of each destination table, to check the others merged into it against.
  struct FirstOfTable {
    const config::SourceConfig* cfg;
    const source::StreamInfo* info;
    Schema schema;
    std::string dest;
  };
  std::map<std::string, FirstOfTable> first_of_table;
  for (const auto& s : sources) {
    const std::string described = s->src->Describe();
    report->source += (report->source.empty() ? "" : "; ") +
                      (s->cfg->name.empty() ? described : s->cfg->name + ": " + described);
    for (size_t i = 0; i < s->streams.size(); ++i) {
      const source::StreamInfo& info = s->streams[i];
      const std::string& dest = s->destinations[i];
      const Schema schema = DestinationSchema(s->transforms[i].get(), info);
      config::StreamConfig sc = StreamSettings(*s->cfg, info.name);
      if (sc.mode == config::SyncMode::kCdc || sc.mode == config::SyncMode::kCdcOnly) {
        FERRY_RETURN_IF_ERROR(InSource(*s->cfg, s->src->CheckChangeCapture(info)));
        // The changes the next sync reads must still be on the server.
        if (*st) {
          const std::optional<Position> needed = ChangesNeededAfter(
              (*st)->Stream(StateNamespace(*s->cfg, info), info.name), s->src->position_kind());
          if (needed) {
            FERRY_RETURN_IF_ERROR(InSource(*s->cfg, s->src->CheckChangesRetained(info, *needed)));
          }
        }
      }
      // A marker that cannot be read would stop the sync: report it now.
      auto m = (*dst)->ReadMarker(dest);
      if (!m.ok()) return m.status();
      const std::string table = (*dst)->TableName(dest);
      auto first = first_of_table.emplace(table, FirstOfTable{s->cfg, &info, schema, dest});
      std::string merged;
      if (!first.second) {
        const FirstOfTable& f = first.first->second;
        FERRY_RETURN_IF_ERROR(CheckDistinctTables(table, f.dest, dest, (*dst)->Describe()));
        FERRY_RETURN_IF_ERROR(
            CheckSameTable(table, *f.cfg, *f.info, f.schema, *s->cfg, info, schema));
        merged = MergedKeyNote(SourceLabel(*f.cfg, f.info->name), schema);
      }
      report->merged.push_back(std::move(merged));
      report->transforms.push_back(s->transforms[i] ? s->transforms[i]->Describe() : "");
      report->tables.push_back(table);
      report->modes.push_back(std::string(config::SyncModeName(sc.mode)));
      FERRY_RETURN_IF_ERROR((*dst)->SetPartitioning(
          dest, sc.partition_by ? sc.partition_by : cfg.destination.partition_by));
      FERRY_ASSIGN_OR_RETURN(std::string parts, (*dst)->DescribePartitioning(dest, schema));
      report->partitioning.push_back(std::move(parts));
      source::StreamInfo shown = info;
      shown.name = SourceLabel(*s->cfg, info.name);
      report->streams.push_back(std::move(shown));
    }
  }
  return Status::OK();
}

}  // namespace ferry::engine
