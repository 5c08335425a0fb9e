#include "ferry/engine/streams.h"

#include <algorithm>
#include <regex>

namespace ferry::engine {

Result<std::vector<source::StreamInfo>> SelectStreams(const config::SourceConfig& cfg,
                                                      std::vector<source::StreamInfo> all,
                                                      bool require_syncable) {
  std::vector<source::StreamInfo> out;
  if (cfg.all_streams) {
    out = std::move(all);
    if (cfg.mode == config::SyncMode::kIncremental) {
      return Status::InvalidArgument(
          "source.mode incremental needs each stream's cursor column: list the streams under "
          "source.streams with `cursor: <column>`, or use full_refresh for every table");
    }
  } else {
    for (const auto& sc : cfg.streams) {
      auto it = std::find_if(all.begin(), all.end(),
                             [&](const source::StreamInfo& s) { return s.name == sc.name; });
      if (it == all.end()) {
        std::string names;
        for (const auto& s : all) names += (names.empty() ? "" : ", ") + s.name;
        return Status::NotFound("stream '" + sc.name + "' (line " + std::to_string(sc.line) +
                                ") is not a table of the source; its tables are: " +
                                (names.empty() ? "(none)" : names));
      }
      if (sc.mode == config::SyncMode::kIncremental && !sc.cursor) {
        std::string cands;
        for (const auto& c : it->cursor_candidates) cands += (cands.empty() ? "" : ", ") + c;
        return Status::InvalidArgument(
            "stream '" + sc.name + "' (line " + std::to_string(sc.line) +
            "): mode incremental needs `cursor: <column>`; candidates: " +
            (cands.empty() ? "(none)" : cands));
      }
      out.push_back(*it);
    }
  }
  if (require_syncable) {
    for (const auto& s : out) {
      if (!s.error.empty()) return Status::NotSupported("table " + s.name + ": " + s.error);
    }
  }
  return out;
}

config::StreamConfig StreamSettings(const config::SourceConfig& cfg, const std::string& stream) {
  for (const auto& sc : cfg.streams) {
    if (sc.name == stream) return sc;
  }
  config::StreamConfig sc;
  sc.name = stream;
  sc.mode = cfg.mode;
  sc.chunk_rows = cfg.chunk_rows;
  sc.chunk_rows_set = cfg.chunk_rows_set;
  sc.metadata_columns = cfg.metadata_columns;
  sc.soft_deletes = cfg.soft_deletes;
  return sc;
}

Status ApplyKeyOverride(const config::StreamConfig& sc, source::StreamInfo* info) {
  if (sc.primary_key.empty()) return Status::OK();
  for (auto& c : info->columns) c.pk_position = 0;
  int pos = 0;
  for (const auto& name : sc.primary_key) {
    auto it = std::find_if(info->columns.begin(), info->columns.end(),
                           [&](const source::ColumnInfo& c) { return c.name == name; });
    if (it == info->columns.end()) {
      return Status::InvalidArgument("stream " + info->name + " (line " + std::to_string(sc.line) +
                                     "): primary_key column '" + name +
                                     "' is not a column of the table");
    }
    it->pk_position = ++pos;
  }
  info->primary_key = sc.primary_key;
  return Status::OK();
}

std::string DestinationName(const config::SourceConfig& cfg, const config::StreamConfig& settings,
                            const source::StreamInfo& info) {
  if (!settings.table.empty()) return settings.table;
  const std::string* pattern = &cfg.table_name;
  for (const auto& rule : cfg.routes) {
    if (std::regex_match(info.name, std::regex(rule.match))) {
      pattern = &rule.table;
      break;
    }
  }
  if (pattern->empty()) return info.name;
  // The table's own name: the stream's name without its schema ("sales.orders" -> "orders").
  std::string table = info.name;
  if (!info.ns.empty() && table.rfind(info.ns + ".", 0) == 0)
    table = table.substr(info.ns.size() + 1);
  std::string out;
  const std::string& t = *pattern;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '{') {
      const size_t end = t.find('}', i);
      const std::string name = t.substr(i + 1, end - i - 1);
      out += name == "schema"   ? info.ns
             : name == "source" ? (cfg.name.empty() ? cfg.type : cfg.name)
                                : table;
      i = end;
    } else {
      out += t[i];
    }
  }
  return out;
}

Result<std::shared_ptr<transform::Transform>> TransformOf(const config::SourceConfig& cfg,
                                                          const config::StreamConfig& settings,
                                                          const source::StreamInfo& info) {
  if (!settings.transforms()) return std::shared_ptr<transform::Transform>();
  auto t = transform::Transform::Make(settings, info, SourceLabel(cfg, info.name));
  if (!t.ok()) {
    return InSource(cfg, t.status().WithContext("line " + std::to_string(settings.line)));
  }
  return std::move(*t);
}

Schema DestinationSchema(const transform::Transform* t, const source::StreamInfo& info) {
  return t != nullptr ? t->output_schema() : info.ToSchema();
}

std::string SourceLabel(const config::SourceConfig& cfg, const std::string& stream) {
  return cfg.name.empty() ? stream : cfg.name + ":" + stream;
}

std::string MarkerPart(const config::PipelineConfig& cfg, const config::SourceConfig& sc,
                       const std::string& stream, size_t source_streams) {
  if (source_streams > 1) return SourceLabel(sc, stream);
  return cfg.merged() ? sc.name : std::string();
}

Status InSource(const config::SourceConfig& cfg, const Status& s) {
  return cfg.name.empty() ? s : s.WithContext("source " + cfg.name);
}

Result<OpenedSource> OpenSelected(config::SourceConfig& cfg, bool require_syncable) {
  OpenedSource out;
  auto src = source::OpenSource(cfg);
  if (!src.ok()) return InSource(cfg, src.status());
  out.src = std::move(*src);
  auto all = out.src->Discover();
  if (!all.ok()) return InSource(cfg, all.status());
  auto streams = SelectStreams(cfg, std::move(*all), require_syncable);
  if (!streams.ok()) return InSource(cfg, streams.status());
  out.streams = std::move(*streams);
  return out;
}

}  // namespace ferry::engine
