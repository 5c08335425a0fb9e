// The pipeline file: YAML in, typed configuration out, with errors that name the key, the line
// and the fix.
//
// Common keys are parsed here; each source and destination type reads its own keys from an
// Options bag (see Options::Take*), and Options::CheckAllUsed() reports any key nobody took, so
// that a typo is an error, never silently ignored. Any value may reference environment variables
// as ${NAME} or ${NAME:-default}: secrets stay out of the file, and Redact() keeps them out of
// logs. Relative paths are resolved against the folder of the pipeline file.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ferry/base/status.h"

namespace ferry::config {

enum class SyncMode { kFullRefresh, kIncremental, kCdc, kCdcOnly };
std::string_view SyncModeName(SyncMode mode);
Result<SyncMode> ParseSyncMode(const std::string& text);

// Scalar options of one section, with where each came from.
class Options {
 public:
  struct Value {
    std::string text;
    int line = 0;
    bool used = false;
  };

  Options() = default;
  Options(std::string section, std::string base_dir)
      : section_(std::move(section)), base_dir_(std::move(base_dir)) {}

  // The pipeline file the section is in, and the keys of the section the parser took itself
  // (type, mode, streams, ...): an unknown key's error names the file and lists both, so a
  // misspelled shared key gets its "did you mean" too.
  void SetContext(std::string file, std::vector<std::string> taken_keys) {
    file_ = std::move(file);
    taken_ = std::move(taken_keys);
  }
  void Set(const std::string& key, std::string text, int line) {
    values_[key] = Value{std::move(text), line, false};
  }
  bool Has(const std::string& key) const { return values_.count(key) != 0; }

  Result<std::string> TakeString(const std::string& key);  // required
  // The keys of the nested mapping `key:` ({name: text}, in name order), taken; empty when none.
  std::map<std::string, std::string> TakeMap(const std::string& key);
  std::optional<std::string> TakeOptionalString(const std::string& key);
  Result<std::string> TakePath(const std::string& key);  // required, made absolute
  // Required: where files live, as a URI. A URI with a scheme ("s3://bucket/prefix") is kept as
  // written (whether anything can write there is for its reader to say); a "file:" URI must hold
  // an absolute path; a path is made absolute like TakePath's and returned as "file://<path>".
  Result<std::string> TakeLocation(const std::string& key);
  Result<int64_t> TakeInt(const std::string& key, int64_t default_value, int64_t min, int64_t max);
  Result<bool> TakeBool(const std::string& key, bool default_value);
  // "128MB", "64 KiB", "1048576" -> bytes.
  Result<int64_t> TakeBytes(const std::string& key, int64_t default_value);
  // "500ms", "30s", "5m", "12h", "5d" -> milliseconds, at least `min_ms`. When `zero_means` is
  // not empty, "0" is accepted too and the error says what it means ("no limit").
  Result<int64_t> TakeDuration(const std::string& key, int64_t default_ms, int64_t min_ms,
                               const std::string& zero_means = "");

  // Error for the first key nobody took: "pipeline.yaml:7: unknown key 'chunk_row' in source; did
  // you mean 'chunk_rows'? Known keys: ..." (`known`: the keys the section's reader takes, with
  // those the parser took).
  Status CheckAllUsed(const std::vector<std::string>& known) const;

  const std::string& section() const { return section_; }
  const std::string& base_dir() const { return base_dir_; }
  std::string Where(const std::string& key) const;

 private:
  std::string section_;
  std::string base_dir_;
  std::string file_;
  std::vector<std::string> taken_;
  std::map<std::string, Value> values_;
};

inline constexpr int64_t kMaxTieRows = 100000;

// The columns ferry can add to a stream's rows (`metadata_columns`):
//   _ferry_source_table  which source table a row came from ("orders", "east:sales.orders"); it
//                        joins the destination's key, so tables merged into one keep rows of
//                        equal keys apart
//   _ferry_synced_at     when ferry read the row (UTC)
//   _ferry_op            the row's last change: insert, update, delete (kept by deletes: soft) or
//                        read (a load or an incremental window read it)
//   _ferry_source_ts     when the source committed that change (UTC; NULL for reads and where
//                        the log has no commit times)
//   _ferry_position      where that change is in the source's log (its transaction's commit
//                        LSN, binary log end, change-table sequence; NULL for reads)
inline constexpr const char* kMetadataColumns[] = {
    "_ferry_source_table", "_ferry_synced_at", "_ferry_op", "_ferry_source_ts", "_ferry_position"};
// The column `deletes: soft` adds: true for a row the source deleted, false for the others.
inline constexpr const char* kDeletedColumn = "_ferry_deleted";

struct StreamConfig {
  std::string name;  // as the source names it: "orders", "public.orders"
  SyncMode mode = SyncMode::kFullRefresh;
  int64_t chunk_rows = 100000;  // full refresh: rows per chunk (the unit of reading and resuming)
  // chunk_rows was set (here or on the source): then every chunk commits on its own; otherwise
  // a file-based destination commits a load's chunks together until their files reach its
  // target size (SinkStream::LoadCommitBytes).
  bool chunk_rows_set = false;
  std::optional<std::string> cursor;  // incremental: the cursor column
  // Incremental: rows committed at the last cursor value remembered one by one (beyond it, only
  // their digest: see engine/window.h).
  int64_t tie_rows = 2000;
  std::vector<std::string> primary_key;  // overrides the source's key when set
  // Iceberg destinations: the table's partition terms; unset: the destination's, else the
  // table's own spec ([] is unpartitioned).
  std::optional<std::vector<std::string>> partition_by;

  // Transforms (transform/transform.h). Columns read and written: all (unset), only these
  // (`columns`), or all but these (`exclude_columns`); key and cursor columns are always read.
  std::optional<std::vector<std::string>> columns;
  std::vector<std::string> exclude_columns;
  std::vector<std::pair<std::string, std::string>> rename_columns;  // source name -> destination
  // Rows kept: those for which this SQL expression (SQLite's language, over the source's column
  // names) is true; empty: every row.
  std::string filter;
  struct ComputedColumn {
    std::string name;
    std::string expr;  // SQL expression over the source's columns
    std::string type;  // its type ("long", "decimal(12,2)", ...); empty: taken from the expression
    int line = 0;
  };
  std::vector<ComputedColumn> add_columns;
  // The destination table's name; empty: the source's `table_name` template, else the stream's.
  std::string table;
  // Columns ferry adds (kMetadataColumns), after the copied and computed ones.
  std::vector<std::string> metadata_columns;
  // `deletes: soft`: a row the source deletes stays in the destination with its last values and
  // `_ferry_deleted` true (kDeletedColumn); `hard` (the default) removes it. Change streams only.
  bool soft_deletes = false;
  int line = 0;
  // Any transform set (columns, filter, renames, computed or metadata columns, soft deletes).
  bool transforms() const {
    return columns || !exclude_columns.empty() || !rename_columns.empty() || !filter.empty() ||
           !add_columns.empty() || !metadata_columns.empty() || soft_deletes;
  }
};

inline constexpr int kMaxReaders = 64;
int DefaultReaders();

// A `route:` rule: streams whose name (as the source names it: "orders", "sales.orders") matches
// `match` (a regular expression, the whole name) go to table `table` (a template like
// SourceConfig::table_name's, {table} not required). `source`: only that source's streams.
struct RouteRule {
  std::string match;
  std::string table;
  std::string source;
  int line = 0;
};

struct SourceConfig {
  // Several sources (`sources:`): each has a name, which keys its streams' state and its part of
  // every marker. Empty for the single `source:`.
  std::string name;
  std::string type;  // "sqlite", "postgres", ...
  SyncMode mode = SyncMode::kFullRefresh;
  int64_t chunk_rows = 100000;
  bool chunk_rows_set = false;
  // Full refresh: connections reading a table's chunks at once, all in one snapshot (sources
  // that cannot share a snapshot read with one). Default: the machine's cores, at most 4.
  int readers = DefaultReaders();
  bool all_streams = true;  // no `streams:` list: every table
  std::vector<StreamConfig> streams;
  Options options;  // type-specific keys
  // Default names of source-side objects: the pipeline's name, "<pipeline>_<source>" for a
  // named source.
  std::string pipeline;
  // The pipeline's `route:` rules that apply to this source, in the file's order: the first
  // whose pattern matches names the table of a stream without its own `table`.
  std::vector<RouteRule> routes;
  // The metadata columns of every stream without its own `metadata_columns`.
  std::vector<std::string> metadata_columns;
  // `deletes: soft` for every stream without its own `deletes`.
  bool soft_deletes = false;
  // The destination table's name of every stream without its own `table`: "{schema}_{table}",
  // "{source}_{table}", "raw_{table}" ({schema}: the source's schema or database, {table} the
  // table, {source} the source's name); empty: the stream's name.
  std::string table_name;
};

// When CDC commits and how a following sync treats failures (the pipeline's `checkpoint:`).
struct CheckpointConfig {
  int64_t interval_ms = 30000;             // commit at least this often while changes flow
  int64_t max_changes = 200000;            // ... or once this many distinct keys are held
  int64_t max_bytes = int64_t{128} << 20;  // ... or this many bytes of changes
  // ... but not sooner than this after the previous one (max_bytes excepted: memory comes first)
  int64_t min_pause_ms = 0;
  int tolerable_failures = 10;  // consecutive failed rounds (lost server) before stopping
  // A sink's commit of a checkpoint that runs longer is interrupted and the checkpoint abandoned
  // (the round fails, retryably); 0 = no limit.
  int64_t timeout_ms = 10 * 60 * 1000;
  // Where several sources feed one table: exactly_once holds a source back at its barrier until
  // every source has reached one (commits cut every source at a checkpoint); at_least_once lets
  // data pass (a restart may apply some of it twice).
  bool exactly_once = true;
  // An alignment waiting longer is abandoned (the next checkpoint covers it); 0 = no limit.
  int64_t alignment_timeout_ms = 0;
  // Checkpoints of a merged table handed to its sink and not yet recorded; one that aligns
  // beyond this is folded into the next.
  int max_concurrent = 1;
};

// `metrics:` — the HTTP endpoints of a running sync (docs/operations.md).
struct MetricsConfig {
  std::string listen;                // "host:port"; empty: not served
  int64_t ready_within_ms = 300000;  // /readyz: the last round or checkpoint no older than this
};

// `alerts:` — alarms on a change log, looked at every `check_interval_ms` while a sync runs. A
// limit of 0 is off.
struct AlertsConfig {
  int64_t max_retained_wal = 0;  // bytes the server keeps for ferry (MySQL: bytes of log behind)
  bool stop_on_retained_wal = false;  // on_retained_wal: stop (else warn)
  int64_t stall_after_ms = 0;         // the committed position has not moved while the log has
  int64_t max_lag_ms = 0;             // replication lag
  int64_t check_interval_ms = 15000;
  // How often the source's heartbeat_statement runs (when it has one).
  int64_t heartbeat_interval_ms = 60000;
};

struct DestinationConfig {
  std::string type;  // "iceberg", ...
  Options options;   // type-specific keys
  // The partition terms of every table (a stream's own partition_by overrides them).
  std::optional<std::vector<std::string>> partition_by;
};

struct PipelineConfig {
  std::string name;
  std::string file;      // absolute path of the pipeline file
  std::string base_dir;  // its folder
  // The pipeline's sources: one (`source:`) or several (`sources:`, each named). Streams of
  // several sources that map to the same destination table are merged into it.
  std::vector<SourceConfig> sources;
  SourceConfig& source() { return sources.front(); }
  const SourceConfig& source() const { return sources.front(); }
  bool merged() const { return sources.size() > 1; }
  DestinationConfig destination;
  CheckpointConfig checkpoint;
  MetricsConfig metrics;
  AlertsConfig alerts;
  std::string state_path;
  // What a change-log read may hold in memory (a large transaction's changes, a checkpoint's):
  // past it, held changes go to spill files in `temp_dir`. 0: no limit (all in memory).
  int64_t memory_limit = int64_t{256} << 20;
  std::string temp_dir;  // absolute; default: the state file's folder
};

Result<PipelineConfig> LoadPipelineFile(const std::string& path);
Result<PipelineConfig> ParsePipeline(const std::string& yaml_text, const std::string& file_name,
                                     const std::string& base_dir);

// Expands ${NAME} / ${NAME:-default}; "$$" is a literal "$". Unknown variable without default:
// kInvalidArgument naming it.
Result<std::string> ExpandEnvironment(const std::string& text);

// "0s", "1500ms", "90m", "12h", "5d" -> milliseconds; nullopt for anything else.
std::optional<int64_t> ParseDurationMs(const std::string& text);

// Hides passwords in DSNs and URLs: "password=secret" -> "password=***",
// "postgresql://u:secret@h/db" -> "postgresql://u:***@h/db".
std::string Redact(const std::string& text);

}  // namespace ferry::config
