#include "ferry/config/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <regex>
#include <thread>

#include "ferry/base/fs.h"

namespace ferry::config {

int DefaultReaders() {
  const unsigned cores = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(cores, 1u, 4u));
}

namespace {

int LineOf(const YAML::Node& n) { return n.Mark().line + 1; }

std::string At(const std::string& file, int line) { return file + ":" + std::to_string(line); }

// Levenshtein distance, for "did you mean" hints.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] =
          std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string UnknownKeyMessage(const std::string& key, const std::string& where,
                              const std::vector<std::string>& known) {
  std::string m = "unknown key '" + key + "' in " + where;
  std::string best;
  size_t best_d = 3;
  for (const auto& k : known) {
    size_t d = EditDistance(key, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  if (!best.empty()) m += "; did you mean '" + best + "'?";
  m += " Known keys: ";
  for (size_t i = 0; i < known.size(); ++i) m += (i ? ", " : "") + known[i];
  return m;
}

class Parser {
 public:
  Parser(std::string file, std::string base_dir)
      : file_(std::move(file)), base_dir_(std::move(base_dir)) {}

  Result<PipelineConfig> Parse(const std::string& text) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      return Status::InvalidArgument(At(file_, e.mark.line + 1) + ": not valid YAML: " + e.msg);
    }
    if (!root.IsMap()) {
      return Status::InvalidArgument(
          file_ + ": a pipeline file is a YAML mapping with keys name, source, destination, state");
    }
    static const std::vector<std::string> kTop = {
        "name",    "source", "sources",      "destination", "state", "checkpoint",
        "metrics", "alerts", "memory_limit", "temp_dir",    "route"};
    PipelineConfig cfg;
    cfg.file = file_;
    cfg.base_dir = base_dir_;
    for (auto it = root.begin(); it != root.end(); ++it) {
      std::string key = it->first.as<std::string>();
      if (std::find(kTop.begin(), kTop.end(), key) == kTop.end()) {
        return Status::InvalidArgument(At(file_, LineOf(it->first)) + ": " +
                                       UnknownKeyMessage(key, "the pipeline file", kTop));
      }
    }
    FERRY_ASSIGN_OR_RETURN(cfg.name, RequiredScalar(root, "name", "the pipeline file"));
    static const std::regex kName("[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}");
    if (!std::regex_match(cfg.name, kName)) {
      return Status::InvalidArgument(
          At(file_, LineOf(root["name"])) + ": pipeline name '" + cfg.name +
          "' must be 1-128 characters of letters, digits, '_', '.', '-' (it keys markers and "
          "state)");
    }
    FERRY_RETURN_IF_ERROR(ParseSources(root, &cfg.sources));
    // Objects a source creates (a replication slot, a publication) are named after the pipeline,
    // and after the source when there are several: two sources may share a server.
    for (auto& src : cfg.sources) {
      src.pipeline = src.name.empty() ? cfg.name : cfg.name + "_" + src.name;
    }
    FERRY_RETURN_IF_ERROR(ParseRoutes(root, &cfg.sources));
    FERRY_RETURN_IF_ERROR(ParseDestination(root, &cfg.destination));
    FERRY_RETURN_IF_ERROR(ParseCheckpoint(root, &cfg.checkpoint));
    FERRY_RETURN_IF_ERROR(ParseMetrics(root, &cfg.metrics));
    FERRY_RETURN_IF_ERROR(ParseAlerts(root, &cfg.alerts));
    if (root["state"]) {
      FERRY_ASSIGN_OR_RETURN(std::string state, RequiredScalar(root, "state", "the pipeline file"));
      cfg.state_path = AbsolutePath(JoinPath(base_dir_, state));
      if (!state.empty() && state[0] == '/') cfg.state_path = AbsolutePath(state);
    } else {
      cfg.state_path = AbsolutePath(JoinPath(base_dir_, cfg.name + ".state.json"));
    }
    // Top-level scalars read as a section's are (sizes, paths relative to the file).
    Options top("pipeline", base_dir_);
    for (const char* key : {"memory_limit", "temp_dir"}) {
      if (!root[key]) continue;
      FERRY_ASSIGN_OR_RETURN(std::string text, RequiredScalar(root, key, "the pipeline file"));
      top.Set(key, text, LineOf(root[key]));
    }
    top.SetContext(file_, {});
    if (root["memory_limit"] && root["memory_limit"].IsScalar() &&
        root["memory_limit"].Scalar() == "0") {
      cfg.memory_limit = 0;  // no limit: every held change in memory
      (void)top.TakeOptionalString("memory_limit");
    } else {
      FERRY_ASSIGN_OR_RETURN(cfg.memory_limit, top.TakeBytes("memory_limit", cfg.memory_limit));
      if (cfg.memory_limit < (int64_t{1} << 20)) {
        return Status::InvalidArgument(top.Where("memory_limit") +
                                       " is at least 1MiB (or 0: no limit)");
      }
    }
    if (top.Has("temp_dir")) {
      FERRY_ASSIGN_OR_RETURN(cfg.temp_dir, top.TakePath("temp_dir"));
    } else {
      const size_t slash = cfg.state_path.rfind('/');
      cfg.temp_dir =
          slash == std::string::npos ? "." : cfg.state_path.substr(0, std::max<size_t>(slash, 1));
    }
    return cfg;
  }

 private:
  Result<std::string> Scalar(const YAML::Node& n, const std::string& what) {
    if (!n.IsScalar()) {
      return Status::InvalidArgument(At(file_, LineOf(n)) + ": " + what +
                                     " must be a single value, not a list or mapping");
    }
    auto expanded = ExpandEnvironment(n.Scalar());
    if (!expanded.ok()) {
      return Status::InvalidArgument(At(file_, LineOf(n)) + ": " + what + ": " +
                                     expanded.status().message());
    }
    return std::move(expanded).value();
  }

  Result<std::string> RequiredScalar(const YAML::Node& parent, const std::string& key,
                                     const std::string& where) {
    YAML::Node n = parent[key];
    if (!n) {
      return Status::InvalidArgument(file_ + ": missing key '" + key + "' in " + where);
    }
    return Scalar(n, "'" + key + "'");
  }

  // Copies every scalar key of `section` except `skip` into an Options bag; the scalar keys of a
  // mapping one level down (`s3: {region: ...}`) become dotted keys ("s3.region").
  Result<Options> CollectOptions(const YAML::Node& section, const std::string& name,
                                 const std::vector<std::string>& skip) {
    Options opts(name, base_dir_);
    opts.SetContext(file_, skip);
    for (auto it = section.begin(); it != section.end(); ++it) {
      std::string key = it->first.as<std::string>();
      if (std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
      if (it->second.IsMap()) {
        for (auto sub = it->second.begin(); sub != it->second.end(); ++sub) {
          const std::string dotted = key + "." + sub->first.as<std::string>();
          FERRY_ASSIGN_OR_RETURN(std::string v, Scalar(sub->second, name + "." + dotted));
          opts.Set(dotted, std::move(v), LineOf(sub->first));
        }
        continue;
      }
      FERRY_ASSIGN_OR_RETURN(std::string v, Scalar(it->second, name + "." + key));
      opts.Set(key, std::move(v), LineOf(it->first));
    }
    return opts;
  }

  // `source:` (one) or `sources:` (a list of named sources).
  Status ParseSources(const YAML::Node& root, std::vector<SourceConfig>* out) {
    YAML::Node one = root["source"], many = root["sources"];
    if (one && many) {
      return Status::InvalidArgument(At(file_, LineOf(many)) +
                                     ": the pipeline has both 'source:' and 'sources:'; use "
                                     "'source:' for one source, 'sources:' for several");
    }
    if (one) {
      if (!one.IsMap()) {
        return Status::InvalidArgument(file_ +
                                       ": missing 'source:' mapping (with at least 'type')");
      }
      if (one["name"]) {
        return Status::InvalidArgument(
            At(file_, LineOf(one["name"])) +
            ": 'name' names one of several sources; with one source, remove it (or list the "
            "sources under 'sources:')");
      }
      out->emplace_back();
      return ParseSource(one, "source", &out->back());
    }
    if (!many) {
      return Status::InvalidArgument(file_ + ": missing 'source:' mapping (with at least 'type')");
    }
    if (!many.IsSequence() || many.size() == 0) {
      return Status::InvalidArgument(
          At(file_, LineOf(many)) +
          ": 'sources:' is a list of sources, each a mapping with 'name' and 'type'");
    }
    static const std::regex kName("[A-Za-z0-9_][A-Za-z0-9_-]{0,63}");
    for (const auto& n : many) {
      if (!n.IsMap()) {
        return Status::InvalidArgument(At(file_, LineOf(n)) +
                                       ": each source is a mapping with 'name' and 'type'");
      }
      SourceConfig src;
      FERRY_ASSIGN_OR_RETURN(src.name, RequiredScalar(n, "name", "a source of 'sources:'"));
      if (!std::regex_match(src.name, kName)) {
        return Status::InvalidArgument(
            At(file_, LineOf(n["name"])) + ": source name '" + src.name +
            "' must be 1-64 characters of letters, digits, '_', '-' (it keys the source's "
            "state and its part of every marker)");
      }
      for (const auto& prev : *out) {
        if (prev.name == src.name) {
          return Status::InvalidArgument(At(file_, LineOf(n["name"])) + ": source '" + src.name +
                                         "' is listed twice; give every source its own name");
        }
      }
      FERRY_RETURN_IF_ERROR(ParseSource(n, "sources." + src.name, &src));
      out->push_back(std::move(src));
    }
    return Status::OK();
  }

  Status ParseSource(const YAML::Node& n, const std::string& section, SourceConfig* src) {
    FERRY_ASSIGN_OR_RETURN(src->type, RequiredScalar(n, "type", section));
    if (n["mode"]) {
      FERRY_ASSIGN_OR_RETURN(std::string m, Scalar(n["mode"], section + ".mode"));
      auto mode = ParseSyncMode(m);
      if (!mode.ok()) return mode.status().WithContext(At(file_, LineOf(n["mode"])));
      src->mode = *mode;
    }
    if (n["chunk_rows"]) {
      FERRY_ASSIGN_OR_RETURN(src->chunk_rows,
                             PositiveInt(n["chunk_rows"], section + ".chunk_rows"));
      src->chunk_rows_set = true;
    }
    if (n["readers"]) {
      FERRY_ASSIGN_OR_RETURN(int64_t readers, PositiveInt(n["readers"], section + ".readers"));
      if (readers > kMaxReaders) {
        return Status::InvalidArgument(At(file_, LineOf(n["readers"])) + ": " + section +
                                       ".readers is at most " + std::to_string(kMaxReaders) +
                                       " (each is a connection)");
      }
      src->readers = static_cast<int>(readers);
    }
    if (n["table_name"]) {
      FERRY_ASSIGN_OR_RETURN(src->table_name, Scalar(n["table_name"], section + ".table_name"));
      FERRY_RETURN_IF_ERROR(CheckTemplate(src->table_name, LineOf(n["table_name"])));
    }
    if (n["metadata_columns"]) {
      FERRY_ASSIGN_OR_RETURN(src->metadata_columns,
                             MetadataColumns(n["metadata_columns"], section));
    }
    if (n["deletes"]) {
      FERRY_ASSIGN_OR_RETURN(src->soft_deletes, Deletes(n["deletes"], section + ".deletes"));
      if (!n["streams"]) {  // every table, in the source's mode
        FERRY_RETURN_IF_ERROR(
            CheckSoftDeletes(src->mode, src->soft_deletes, LineOf(n["deletes"]), section));
      }
    }
    FERRY_ASSIGN_OR_RETURN(
        src->options, CollectOptions(n, section,
                                     {"name", "type", "mode", "chunk_rows", "readers", "streams",
                                      "table_name", "metadata_columns", "deletes"}));
    if (YAML::Node streams = n["streams"]) {
      if (!streams.IsSequence()) {
        return Status::InvalidArgument(At(file_, LineOf(streams)) + ": " + section +
                                       ".streams must be a list of table names or "
                                       "mappings with 'name'");
      }
      src->all_streams = false;
      for (const auto& s : streams) {
        StreamConfig sc;
        sc.mode = src->mode;
        sc.chunk_rows = src->chunk_rows;
        sc.chunk_rows_set = src->chunk_rows_set;
        sc.metadata_columns = src->metadata_columns;
        sc.soft_deletes = src->soft_deletes;
        sc.line = LineOf(s);
        if (s.IsScalar()) {
          FERRY_ASSIGN_OR_RETURN(sc.name, Scalar(s, "stream name"));
        } else if (s.IsMap()) {
          FERRY_RETURN_IF_ERROR(ParseStream(s, &sc));
        } else {
          return Status::InvalidArgument(At(file_, LineOf(s)) +
                                         ": a stream is a table name or a mapping with 'name'");
        }
        for (const auto& prev : src->streams) {
          if (prev.name == sc.name) {
            return Status::InvalidArgument(At(file_, sc.line) + ": stream '" + sc.name +
                                           "' is listed twice");
          }
        }
        src->streams.push_back(std::move(sc));
      }
      if (src->streams.empty()) {
        return Status::InvalidArgument(At(file_, LineOf(streams)) + ": " + section +
                                       ".streams is empty; remove it to sync every table");
      }
      // The source's deletes: soft is its change streams' default: one at least.
      if (src->soft_deletes &&
          std::none_of(src->streams.begin(), src->streams.end(),
                       [](const StreamConfig& sc) { return sc.soft_deletes; })) {
        return CheckSoftDeletes(src->streams.front().mode, true, LineOf(n["deletes"]), section);
      }
    }
    return Status::OK();
  }

  Status ParseStream(const YAML::Node& s, StreamConfig* sc) {
    static const std::vector<std::string> kKeys = {
        "name",        "mode",         "chunk_rows", "cursor",           "tie_rows",
        "primary_key", "partition_by", "columns",    "exclude_columns",  "rename_columns",
        "filter",      "add_columns",  "table",      "metadata_columns", "deletes"};
    for (auto it = s.begin(); it != s.end(); ++it) {
      std::string key = it->first.as<std::string>();
      if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
        return Status::InvalidArgument(At(file_, LineOf(it->first)) + ": " +
                                       UnknownKeyMessage(key, "a stream", kKeys));
      }
    }
    FERRY_ASSIGN_OR_RETURN(sc->name, RequiredScalar(s, "name", "a stream"));
    if (sc->name.empty())
      return Status::InvalidArgument(At(file_, sc->line) + ": empty stream name");
    if (s["mode"]) {
      FERRY_ASSIGN_OR_RETURN(std::string m, Scalar(s["mode"], "mode"));
      auto mode = ParseSyncMode(m);
      if (!mode.ok()) return mode.status().WithContext(At(file_, LineOf(s["mode"])));
      sc->mode = *mode;
    }
    if (s["chunk_rows"]) {
      FERRY_ASSIGN_OR_RETURN(sc->chunk_rows, PositiveInt(s["chunk_rows"], "chunk_rows"));
      sc->chunk_rows_set = true;
    }
    if (s["cursor"]) {
      FERRY_ASSIGN_OR_RETURN(std::string c, Scalar(s["cursor"], "cursor"));
      sc->cursor = c;
    }
    if (s["tie_rows"]) {
      FERRY_ASSIGN_OR_RETURN(sc->tie_rows, PositiveInt(s["tie_rows"], "tie_rows"));
      if (sc->tie_rows > kMaxTieRows) {
        return Status::InvalidArgument(
            At(file_, LineOf(s["tie_rows"])) + ": tie_rows is at most " +
            std::to_string(kMaxTieRows) +
            " (the fingerprints travel in every marker and state write; past it ferry keeps a "
            "digest of the rows instead)");
      }
    }
    if (YAML::Node pb = s["partition_by"]) {
      FERRY_ASSIGN_OR_RETURN(sc->partition_by, Terms(pb, "partition_by"));
    }
    if (YAML::Node pk = s["primary_key"]) {
      FERRY_ASSIGN_OR_RETURN(sc->primary_key, Names(pk, "primary_key"));
    }
    return ParseTransforms(s, sc);
  }

  // A column name or a list of them.
  Result<std::vector<std::string>> Names(const YAML::Node& n, const std::string& what) {
    std::vector<std::string> out;
    if (n.IsScalar()) {
      FERRY_ASSIGN_OR_RETURN(std::string c, Scalar(n, what));
      out.push_back(c);
      return out;
    }
    if (!n.IsSequence()) {
      return Status::InvalidArgument(At(file_, LineOf(n)) + ": " + what +
                                     " is a column name or a list of them");
    }
    for (const auto& c : n) {
      FERRY_ASSIGN_OR_RETURN(std::string col, Scalar(c, what + " column"));
      if (std::find(out.begin(), out.end(), col) != out.end()) {
        return Status::InvalidArgument(At(file_, LineOf(c)) + ": " + what + " lists '" + col +
                                       "' twice");
      }
      out.push_back(col);
    }
    return out;
  }

  // A mapping of names to text, in the file's order.
  Result<std::vector<std::pair<std::string, std::string>>> Pairs(const YAML::Node& n,
                                                                 const std::string& what,
                                                                 const std::string& example) {
    if (!n.IsMap()) {
      return Status::InvalidArgument(At(file_, LineOf(n)) + ": " + what + " is a mapping, e.g. " +
                                     example);
    }
    std::vector<std::pair<std::string, std::string>> out;
    for (auto it = n.begin(); it != n.end(); ++it) {
      FERRY_ASSIGN_OR_RETURN(std::string key, Scalar(it->first, what));
      FERRY_ASSIGN_OR_RETURN(std::string value, Scalar(it->second, what + "." + key));
      if (key.empty() || value.empty()) {
        return Status::InvalidArgument(At(file_, LineOf(it->first)) + ": " + what +
                                       " has an empty name or value");
      }
      out.emplace_back(std::move(key), std::move(value));
    }
    return out;
  }

  // columns / exclude_columns, rename_columns, filter, add_columns, table.
  Status ParseTransforms(const YAML::Node& s, StreamConfig* sc) {
    if (s["columns"] && s["exclude_columns"]) {
      return Status::InvalidArgument(At(file_, LineOf(s["exclude_columns"])) + ": stream '" +
                                     sc->name +
                                     "' sets both columns and exclude_columns; keep one (columns "
                                     "lists what is copied, exclude_columns what is not)");
    }
    if (YAML::Node c = s["columns"]) {
      FERRY_ASSIGN_OR_RETURN(sc->columns, Names(c, "columns"));
      if (sc->columns->empty()) {
        return Status::InvalidArgument(At(file_, LineOf(c)) +
                                       ": columns is empty; list the columns to copy");
      }
    }
    if (YAML::Node c = s["exclude_columns"]) {
      FERRY_ASSIGN_OR_RETURN(sc->exclude_columns, Names(c, "exclude_columns"));
    }
    if (YAML::Node r = s["rename_columns"]) {
      FERRY_ASSIGN_OR_RETURN(sc->rename_columns,
                             Pairs(r, "rename_columns", "{cust_id: customer_id}"));
    }
    if (YAML::Node f = s["filter"]) {
      FERRY_ASSIGN_OR_RETURN(sc->filter, Scalar(f, "filter"));
      if (sc->filter.find_first_not_of(" \t\r\n") == std::string::npos) {
        return Status::InvalidArgument(At(file_, LineOf(f)) +
                                       ": filter is empty; remove it to copy every row");
      }
    }
    if (YAML::Node a = s["add_columns"]) {
      if (!a.IsMap()) {
        return Status::InvalidArgument(
            At(file_, LineOf(a)) +
            ": add_columns is a mapping of new column names to expressions, e.g. {amount_cents: "
            "\"CAST(amount * 100 AS INTEGER)\"} or {day: {expr: \"date(created_at)\", type: "
            "date}}");
      }
      for (auto it = a.begin(); it != a.end(); ++it) {
        StreamConfig::ComputedColumn col;
        col.line = LineOf(it->first);
        FERRY_ASSIGN_OR_RETURN(col.name, Scalar(it->first, "add_columns"));
        const YAML::Node v = it->second;
        if (v.IsMap()) {
          for (auto k = v.begin(); k != v.end(); ++k) {
            const std::string key = k->first.as<std::string>();
            if (key != "expr" && key != "type") {
              return Status::InvalidArgument(
                  At(file_, LineOf(k->first)) + ": " +
                  UnknownKeyMessage(key, "add_columns." + col.name, {"expr", "type"}));
            }
          }
          FERRY_ASSIGN_OR_RETURN(col.expr, RequiredScalar(v, "expr", "add_columns." + col.name));
          if (v["type"]) {
            FERRY_ASSIGN_OR_RETURN(col.type, Scalar(v["type"], "type"));
          }
        } else {
          FERRY_ASSIGN_OR_RETURN(col.expr, Scalar(v, "add_columns." + col.name));
        }
        if (col.name.empty() || col.expr.empty()) {
          return Status::InvalidArgument(At(file_, col.line) +
                                         ": add_columns has an empty name or expression");
        }
        sc->add_columns.push_back(std::move(col));
      }
    }
    if (YAML::Node m = s["metadata_columns"]) {
      FERRY_ASSIGN_OR_RETURN(sc->metadata_columns, MetadataColumns(m, "stream " + sc->name));
    }
    if (YAML::Node d = s["deletes"]) {
      FERRY_ASSIGN_OR_RETURN(sc->soft_deletes, Deletes(d, "stream " + sc->name + ".deletes"));
      FERRY_RETURN_IF_ERROR(
          CheckSoftDeletes(sc->mode, sc->soft_deletes, LineOf(d), "stream " + sc->name));
    } else if (sc->mode != SyncMode::kCdc && sc->mode != SyncMode::kCdcOnly) {
      sc->soft_deletes = false;  // the source's deletes: soft is for its change streams
    }
    if (YAML::Node t = s["table"]) {
      FERRY_ASSIGN_OR_RETURN(sc->table, Scalar(t, "table"));
      if (sc->table.empty()) {
        return Status::InvalidArgument(At(file_, LineOf(t)) +
                                       ": table is empty; remove it to keep the stream's name");
      }
    }
    return Status::OK();
  }

  // partition_by: a list of terms ("day(created_at)", "bucket(16, id)", "region"), or one term;
  // [] is a list too (unpartitioned).
  Result<std::vector<std::string>> Terms(const YAML::Node& n, const std::string& what) {
    std::vector<std::string> out;
    if (n.IsScalar()) {
      FERRY_ASSIGN_OR_RETURN(std::string t, Scalar(n, what));
      out.push_back(t);
      return out;
    }
    if (!n.IsSequence()) {
      return Status::InvalidArgument(
          At(file_, LineOf(n)) + ": " + what +
          " is a list of partition terms, e.g. [\"day(created_at)\", \"bucket(16, id)\"]");
    }
    for (const auto& t : n) {
      if (!t.IsScalar()) {
        return Status::InvalidArgument(
            At(file_, LineOf(t)) + ": " + what +
            " has a term that is not text; quote terms with a comma: \"bucket(16, id)\"");
      }
      FERRY_ASSIGN_OR_RETURN(std::string term, Scalar(t, what));
      out.push_back(term);
    }
    return out;
  }

  // route: a list of {match, table, source} rules, each source given those that apply to it.
  Status ParseRoutes(const YAML::Node& root, std::vector<SourceConfig>* sources) {
    YAML::Node n = root["route"];
    if (!n) return Status::OK();
    if (!n.IsSequence()) {
      return Status::InvalidArgument(
          At(file_, LineOf(n)) +
          ": route is a list of rules, e.g. [{match: \"shop_[0-9]+\\\\.orders\", table: orders}]");
    }
    for (const auto& r : n) {
      if (!r.IsMap()) {
        return Status::InvalidArgument(At(file_, LineOf(r)) +
                                       ": a route rule is a mapping with match and table");
      }
      for (auto it = r.begin(); it != r.end(); ++it) {
        const std::string key = it->first.as<std::string>();
        if (key != "match" && key != "table" && key != "source") {
          return Status::InvalidArgument(
              At(file_, LineOf(it->first)) + ": " +
              UnknownKeyMessage(key, "a route rule", {"match", "table", "source"}));
        }
      }
      RouteRule rule;
      rule.line = LineOf(r);
      FERRY_ASSIGN_OR_RETURN(rule.match, RequiredScalar(r, "match", "a route rule"));
      FERRY_ASSIGN_OR_RETURN(rule.table, RequiredScalar(r, "table", "a route rule"));
      if (r["source"]) {
        FERRY_ASSIGN_OR_RETURN(rule.source, Scalar(r["source"], "source"));
      }
      try {
        std::regex check(rule.match);
      } catch (const std::regex_error& e) {
        return Status::InvalidArgument(At(file_, rule.line) + ": route match '" + rule.match +
                                       "' is not a regular expression: " + e.what());
      }
      FERRY_RETURN_IF_ERROR(CheckTemplate(rule.table, rule.line, /*needs_table=*/false));
      bool applied = false;
      for (auto& src : *sources) {
        if (!rule.source.empty() && rule.source != src.name) continue;
        src.routes.push_back(rule);
        applied = true;
      }
      if (!applied) {
        return Status::InvalidArgument(At(file_, rule.line) + ": route rule names source '" +
                                       rule.source + "', which the pipeline does not have");
      }
    }
    return Status::OK();
  }

  // deletes: hard | soft; true for soft.
  Result<bool> Deletes(const YAML::Node& n, const std::string& what) {
    FERRY_ASSIGN_OR_RETURN(std::string v, Scalar(n, what));
    if (v == "soft") return true;
    if (v == "hard") return false;
    return Status::InvalidArgument(At(file_, LineOf(n)) + ": " + what + " is '" + v +
                                   "'; use hard (a deleted row is removed, the default) or soft "
                                   "(it stays, with " +
                                   kDeletedColumn + " true)");
  }

  // Soft deletes keep the rows a change stream deletes; other modes never see a delete.
  Status CheckSoftDeletes(SyncMode mode, bool soft, int line, const std::string& what) {
    if (!soft || mode == SyncMode::kCdc || mode == SyncMode::kCdcOnly) return Status::OK();
    return Status::InvalidArgument(
        At(file_, line) + ": " + what + " sets deletes: soft with mode " +
        std::string(SyncModeName(mode)) + ", which sees no deletes (" +
        (mode == SyncMode::kFullRefresh ? "a full refresh replaces the table"
                                        : "an incremental window reads rows, not their deletes") +
        "); use mode cdc to keep deleted rows, or remove deletes");
  }

  // metadata_columns: names of kMetadataColumns.
  Result<std::vector<std::string>> MetadataColumns(const YAML::Node& n, const std::string& where) {
    FERRY_ASSIGN_OR_RETURN(std::vector<std::string> out, Names(n, where + ".metadata_columns"));
    std::vector<std::string> known(std::begin(kMetadataColumns), std::end(kMetadataColumns));
    for (const auto& c : out) {
      if (std::find(known.begin(), known.end(), c) == known.end()) {
        return Status::InvalidArgument(At(file_, LineOf(n)) + ": " +
                                       UnknownKeyMessage(c, where + ".metadata_columns", known));
      }
    }
    return out;
  }

  // A table_name template: text with {schema}, {table} and {source} in it, {table} at least.
  Status CheckTemplate(const std::string& t, int line, bool needs_table = true) {
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '}') {
        return Status::InvalidArgument(At(file_, line) + ": table_name '" + t +
                                       "' has a '}' that closes nothing");
      }
      if (t[i] != '{') continue;
      const size_t end = t.find('}', i);
      const std::string name = t.substr(i + 1, end == std::string::npos ? end : end - i - 1);
      if (end == std::string::npos || (name != "schema" && name != "table" && name != "source")) {
        return Status::InvalidArgument(
            At(file_, line) + ": table_name '" + t + "' has '{" + name +
            (end == std::string::npos ? "" : "}") +
            "'; a template names {schema}, {table} and {source}, e.g. \"{schema}_{table}\"");
      }
      i = end;
    }
    if (needs_table && t.find("{table}") == std::string::npos) {
      return Status::InvalidArgument(At(file_, line) + ": table_name '" + t +
                                     "' has no {table}: every stream would go to one table; add "
                                     "{table}, or name each stream's table with its own 'table'");
    }
    return Status::OK();
  }

  Result<int64_t> PositiveInt(const YAML::Node& n, const std::string& what) {
    FERRY_ASSIGN_OR_RETURN(std::string v, Scalar(n, what));
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno != 0 || x <= 0) {
      return Status::InvalidArgument(At(file_, LineOf(n)) + ": " + what +
                                     " must be a positive whole number, not '" + v + "'");
    }
    return static_cast<int64_t>(x);
  }

  Status ParseDestination(const YAML::Node& root, DestinationConfig* dst) {
    YAML::Node n = root["destination"];
    if (!n || !n.IsMap()) {
      return Status::InvalidArgument(file_ +
                                     ": missing 'destination:' mapping (with at least 'type')");
    }
    FERRY_ASSIGN_OR_RETURN(dst->type, RequiredScalar(n, "type", "destination"));
    if (YAML::Node pb = n["partition_by"]) {
      FERRY_ASSIGN_OR_RETURN(dst->partition_by, Terms(pb, "destination.partition_by"));
    }
    FERRY_ASSIGN_OR_RETURN(dst->options,
                           CollectOptions(n, "destination", {"type", "partition_by"}));
    return Status::OK();
  }

  Status ParseCheckpoint(const YAML::Node& root, CheckpointConfig* cp) {
    YAML::Node n = root["checkpoint"];
    if (!n) return Status::OK();
    if (!n.IsMap()) {
      return Status::InvalidArgument(At(file_, LineOf(n)) +
                                     ": 'checkpoint:' is a mapping (interval, min_pause, "
                                     "timeout, max_changes, max_bytes, tolerable_failures, "
                                     "mode, alignment_timeout, max_concurrent)");
    }
    FERRY_ASSIGN_OR_RETURN(Options o, CollectOptions(n, "checkpoint", {}));
    FERRY_ASSIGN_OR_RETURN(cp->interval_ms, o.TakeDuration("interval", cp->interval_ms, 100));
    FERRY_ASSIGN_OR_RETURN(cp->min_pause_ms,
                           o.TakeDuration("min_pause", cp->min_pause_ms, 0, "none"));
    FERRY_ASSIGN_OR_RETURN(cp->timeout_ms,
                           o.TakeDuration("timeout", cp->timeout_ms, 100, "no limit"));
    FERRY_ASSIGN_OR_RETURN(cp->max_changes,
                           o.TakeInt("max_changes", cp->max_changes, 1, int64_t{1} << 40));
    FERRY_ASSIGN_OR_RETURN(cp->max_bytes, o.TakeBytes("max_bytes", cp->max_bytes));
    if (auto mode = o.TakeOptionalString("mode")) {
      if (*mode != "exactly_once" && *mode != "at_least_once") {
        return Status::InvalidArgument(o.Where("mode") +
                                       " is exactly_once or at_least_once, not '" + *mode + "'");
      }
      cp->exactly_once = *mode == "exactly_once";
    }
    FERRY_ASSIGN_OR_RETURN(
        cp->alignment_timeout_ms,
        o.TakeDuration("alignment_timeout", cp->alignment_timeout_ms, 10, "no limit"));
    FERRY_ASSIGN_OR_RETURN(int64_t concurrent,
                           o.TakeInt("max_concurrent", cp->max_concurrent, 1, 64));
    cp->max_concurrent = static_cast<int>(concurrent);
    FERRY_ASSIGN_OR_RETURN(int64_t tolerable,
                           o.TakeInt("tolerable_failures", cp->tolerable_failures, 0, 1000000));
    cp->tolerable_failures = static_cast<int>(tolerable);
    return o.CheckAllUsed({"interval", "min_pause", "timeout", "max_changes", "max_bytes",
                           "tolerable_failures", "mode", "alignment_timeout", "max_concurrent"});
  }

  // A mapping section's options, or none when the section is absent.
  Result<std::optional<Options>> Section(const YAML::Node& root, const std::string& name,
                                         const std::string& keys) {
    YAML::Node n = root[name];
    if (!n) return std::optional<Options>();
    if (!n.IsMap()) {
      return Status::InvalidArgument(At(file_, LineOf(n)) + ": '" + name + ":' is a mapping (" +
                                     keys + ")");
    }
    FERRY_ASSIGN_OR_RETURN(Options o, CollectOptions(n, name, {}));
    return std::optional<Options>(std::move(o));
  }

  Status ParseMetrics(const YAML::Node& root, MetricsConfig* m) {
    FERRY_ASSIGN_OR_RETURN(auto o, Section(root, "metrics", "listen, ready_within"));
    if (!o) return Status::OK();
    FERRY_ASSIGN_OR_RETURN(m->listen, o->TakeString("listen"));
    FERRY_ASSIGN_OR_RETURN(m->ready_within_ms,
                           o->TakeDuration("ready_within", m->ready_within_ms, 1000));
    return o->CheckAllUsed({"listen", "ready_within"});
  }

  Status ParseAlerts(const YAML::Node& root, AlertsConfig* a) {
    FERRY_ASSIGN_OR_RETURN(auto o,
                           Section(root, "alerts",
                                   "max_retained_wal, on_retained_wal, stall_after, max_lag, "
                                   "check_interval, heartbeat_interval"));
    if (!o) return Status::OK();
    FERRY_ASSIGN_OR_RETURN(a->max_retained_wal, o->TakeBytes("max_retained_wal", 0));
    if (auto on = o->TakeOptionalString("on_retained_wal")) {
      if (*on != "warn" && *on != "stop") {
        return Status::InvalidArgument(o->Where("on_retained_wal") + " is warn or stop, not '" +
                                       *on + "'");
      }
      a->stop_on_retained_wal = *on == "stop";
    }
    FERRY_ASSIGN_OR_RETURN(a->stall_after_ms, o->TakeDuration("stall_after", 0, 1000, "off"));
    FERRY_ASSIGN_OR_RETURN(a->max_lag_ms, o->TakeDuration("max_lag", 0, 1000, "off"));
    FERRY_ASSIGN_OR_RETURN(a->check_interval_ms,
                           o->TakeDuration("check_interval", a->check_interval_ms, 100));
    FERRY_ASSIGN_OR_RETURN(a->heartbeat_interval_ms,
                           o->TakeDuration("heartbeat_interval", a->heartbeat_interval_ms, 100));
    return o->CheckAllUsed({"max_retained_wal", "on_retained_wal", "stall_after", "max_lag",
                            "check_interval", "heartbeat_interval"});
  }

  std::string file_;
  std::string base_dir_;
};

}  // namespace

std::optional<int64_t> ParseDurationMs(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == 0 || i > 12) return std::nullopt;
  const int64_t n = std::strtoll(text.substr(0, i).c_str(), nullptr, 10);
  const std::string unit = text.substr(i);
  if (unit == "ms") return n;
  if (unit == "s") return n * 1000;
  if (unit == "m") return n * 60 * 1000;
  if (unit == "h") return n * 3600 * 1000;
  if (unit == "d") return n * 24 * 3600 * 1000;
  return std::nullopt;
}

std::string_view SyncModeName(SyncMode mode) {
  switch (mode) {
    case SyncMode::kFullRefresh:
      return "full_refresh";
    case SyncMode::kIncremental:
      return "incremental";
    case SyncMode::kCdc:
      return "cdc";
    case SyncMode::kCdcOnly:
      return "cdc_only";
  }
  return "?";
}

Result<SyncMode> ParseSyncMode(const std::string& text) {
  for (SyncMode m :
       {SyncMode::kFullRefresh, SyncMode::kIncremental, SyncMode::kCdc, SyncMode::kCdcOnly}) {
    if (text == SyncModeName(m)) return m;
  }
  return Status::InvalidArgument("unknown mode '" + text +
                                 "'; use full_refresh, incremental, cdc or cdc_only");
}

std::string Options::Where(const std::string& key) const {
  auto it = values_.find(key);
  std::string w = section_ + "." + key;
  if (it != values_.end() && it->second.line > 0)
    w += " (line " + std::to_string(it->second.line) + ")";
  return w;
}

Result<std::string> Options::TakeString(const std::string& key) {
  auto it = values_.find(key);
  if (it == values_.end()) {
    return Status::InvalidArgument("missing key '" + key + "' in " + section_);
  }
  it->second.used = true;
  return it->second.text;
}

std::map<std::string, std::string> Options::TakeMap(const std::string& key) {
  std::map<std::string, std::string> out;
  const std::string prefix = key + ".";
  for (auto it = values_.lower_bound(prefix);
       it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    it->second.used = true;
    out[it->first.substr(prefix.size())] = it->second.text;
  }
  return out;
}

std::optional<std::string> Options::TakeOptionalString(const std::string& key) {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  it->second.used = true;
  return it->second.text;
}

Result<std::string> Options::TakePath(const std::string& key) {
  FERRY_ASSIGN_OR_RETURN(std::string p, TakeString(key));
  if (p.empty()) return Status::InvalidArgument(Where(key) + " is empty");
  if (p[0] == '/') return AbsolutePath(p);
  return AbsolutePath(JoinPath(base_dir_, p));
}

Result<std::string> Options::TakeLocation(const std::string& key) {
  FERRY_ASSIGN_OR_RETURN(std::string v, TakeString(key));
  if (v.empty()) return Status::InvalidArgument(Where(key) + " is empty");
  // A scheme (RFC 3986: a letter, then letters, digits, '+', '-', '.') and "://", or "file:".
  static const std::regex kUri("^([A-Za-z][A-Za-z0-9+.-]*)://.*");
  std::smatch m;
  std::string scheme;
  if (std::regex_match(v, m, kUri)) {
    scheme = m[1].str();
    std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  } else if (v.size() > 5 && (v.compare(0, 5, "file:") == 0 || v.compare(0, 5, "FILE:") == 0)) {
    scheme = "file";
  }
  if (scheme.empty()) {
    if (v[0] == '/') return "file://" + AbsolutePath(v);
    return "file://" + AbsolutePath(JoinPath(base_dir_, v));
  }
  if (scheme != "file") return v;
  std::string path = v.substr(v.find(':') + 1);
  if (path.rfind("//", 0) == 0) path = path.substr(2);  // file:///abs: no host
  if (path.empty() || path[0] != '/') {
    return Status::InvalidArgument(Where(key) + " '" + v +
                                   "': a file URI takes an absolute path (file:///data/warehouse); "
                                   "write a relative folder as a plain path (./warehouse)");
  }
  return "file://" + AbsolutePath(path);
}

Result<int64_t> Options::TakeInt(const std::string& key, int64_t default_value, int64_t min,
                                 int64_t max) {
  auto v = TakeOptionalString(key);
  if (!v) return default_value;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno != 0 || x < min || x > max) {
    return Status::InvalidArgument(Where(key) + " must be a whole number from " +
                                   std::to_string(min) + " to " + std::to_string(max) + ", not '" +
                                   *v + "'");
  }
  return static_cast<int64_t>(x);
}

Result<bool> Options::TakeBool(const std::string& key, bool default_value) {
  auto v = TakeOptionalString(key);
  if (!v) return default_value;
  if (*v == "true" || *v == "yes" || *v == "on") return true;
  if (*v == "false" || *v == "no" || *v == "off") return false;
  return Status::InvalidArgument(Where(key) + " must be true or false, not '" + *v + "'");
}

Result<int64_t> Options::TakeDuration(const std::string& key, int64_t default_ms, int64_t min_ms,
                                      const std::string& zero_means) {
  auto v = TakeOptionalString(key);
  if (!v) return default_ms;
  auto ms = *v == "0" ? std::optional<int64_t>(0) : ParseDurationMs(*v);
  if (ms && (*ms == 0 ? !zero_means.empty() : *ms >= min_ms)) return *ms;
  return Status::InvalidArgument(
      Where(key) + " must be a duration" +
      (min_ms > 0 ? " of at least " + std::to_string(min_ms) + "ms" : std::string()) +
      ", such as 500ms, 30s or 5m" + (zero_means.empty() ? "" : " (0 for " + zero_means + ")") +
      ", not '" + *v + "'");
}

Result<int64_t> Options::TakeBytes(const std::string& key, int64_t default_value) {
  auto v = TakeOptionalString(key);
  if (!v) return default_value;
  static const std::regex kBytes(R"(\s*([0-9]+)\s*([KMGT]?i?B?)?\s*)", std::regex::icase);
  std::smatch m;
  if (!std::regex_match(*v, m, kBytes)) {
    return Status::InvalidArgument(
        Where(key) + " must be a size like 512MB, 64KiB or 1048576, not '" + *v + "'");
  }
  int64_t n = std::stoll(m[1].str());
  std::string unit = m[2].str();
  int64_t mult = 1;
  if (!unit.empty()) {
    switch (std::toupper(static_cast<unsigned char>(unit[0]))) {
      case 'K':
        mult = 1ll << 10;
        break;
      case 'M':
        mult = 1ll << 20;
        break;
      case 'G':
        mult = 1ll << 30;
        break;
      case 'T':
        mult = 1ll << 40;
        break;
      default:
        mult = 1;
    }
  }
  if (n <= 0 || n > (int64_t{1} << 50) / mult) {
    return Status::InvalidArgument(Where(key) + " is out of range: '" + *v + "'");
  }
  return n * mult;
}

Status Options::CheckAllUsed(const std::vector<std::string>& known) const {
  for (const auto& [key, v] : values_) {
    if (!v.used) {
      std::vector<std::string> all = known;
      for (const auto& k : taken_) {
        if (k != "name" && std::find(all.begin(), all.end(), k) == all.end()) all.push_back(k);
      }
      std::string m = UnknownKeyMessage(key, section_, all);
      if (v.line > 0) {
        m = (file_.empty() ? "line " + std::to_string(v.line) : At(file_, v.line)) + ": " + m;
      }
      return Status::InvalidArgument(m);
    }
  }
  return Status::OK();
}

Result<std::string> ExpandEnvironment(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c != '$') {
      out += c;
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    if (i + 1 >= text.size() || text[i + 1] != '{') {
      out += c;
      continue;
    }
    size_t close = text.find('}', i + 2);
    if (close == std::string::npos) {
      return Status::InvalidArgument("unterminated '${' in value; write $$ for a literal '$'");
    }
    std::string inner = text.substr(i + 2, close - i - 2);
    std::optional<std::string> def;
    if (auto d = inner.find(":-"); d != std::string::npos) {
      def = inner.substr(d + 2);
      inner = inner.substr(0, d);
    }
    static const std::regex kVar("[A-Za-z_][A-Za-z0-9_]*");
    if (!std::regex_match(inner, kVar)) {
      return Status::InvalidArgument("'${" + inner + "}' is not a valid environment variable name");
    }
    const char* env = std::getenv(inner.c_str());
    if (env != nullptr) {
      out += env;
    } else if (def) {
      out += *def;
    } else {
      return Status::InvalidArgument("environment variable " + inner +
                                     " is not set; export it or write ${" + inner + ":-default}");
    }
    i = close;
  }
  return out;
}

std::string Redact(const std::string& text) {
  static const std::regex kKeyValue(
      R"((password|passwd|pwd|secret|token)\s*=\s*('[^']*'|[^\s&;]*))", std::regex::icase);
  static const std::regex kUrl(R"(([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*):([^@\s]*)@)");
  std::string out = std::regex_replace(text, kKeyValue, "$1=***");
  out = std::regex_replace(out, kUrl, "$1:***@");
  return out;
}

Result<PipelineConfig> ParsePipeline(const std::string& yaml_text, const std::string& file_name,
                                     const std::string& base_dir) {
  Parser p(file_name, base_dir);
  return p.Parse(yaml_text);
}

Result<PipelineConfig> LoadPipelineFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    return Status(text.status().code(), "cannot read pipeline file: " + text.status().message() +
                                            " (pass the file with -c PATH)");
  }
  std::string abs = AbsolutePath(path);
  return ParsePipeline(*text, abs, ParentDir(abs));
}

}  // namespace ferry::config
