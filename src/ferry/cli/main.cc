// The ferry command line.
//
//   ferry check    -c pipeline.yaml          validate, open source and destination, show the plan
//   ferry discover -c pipeline.yaml [--json] list tables, columns, types, keys
//   ferry sync     -c pipeline.yaml          run the sync
//   ferry maintain -c pipeline.yaml          compact data files, expire old snapshots
//   ferry verify   -c pipeline.yaml          compare source and destination, table by table
//   ferry catalog serve -c pipeline.yaml     serve the destination's catalog over Iceberg REST
//   ferry faults                             list the fault points (for crash testing)
//   ferry version
//
// Exit codes: 0 success (also after a requested stop), 1 the work failed, 2 bad usage or config.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/base/fault.h"
#include "ferry/base/fs.h"
#include "ferry/base/log.h"
#include "ferry/base/log_setup.h"
#include "ferry/catalog_server/rest_server.h"
#include "ferry/config/config.h"
#include "ferry/engine/sync.h"
#include "ferry/engine/verify.h"
#include "ferry/graph/graph.h"
#include "ferry/lake/file_io.h"
#include "ferry/lake/maintain.h"
#include "ferry/lake/s3_file_io.h"
#include "ferry/metrics/metrics.h"
#include "ferry/metrics/server.h"
#include "ferry/sink/iceberg/warehouse.h"
#include "ferry/state/state.h"

namespace ferry::cli {
namespace {

constexpr const char* kVersion = "0.1.0";

graph::StopFlag g_stop;

void OnSignal(int) { g_stop.Request(); }

const char* kUsage = R"(ferry — replicate databases into Apache Iceberg, exactly once

usage: ferry <command> [options]

commands:
  check     -c FILE          validate the pipeline file, open the source and the destination,
                             print the streams that will sync and the delivery guarantee
  discover  -c FILE [--json] list the source's tables, columns, types, keys and cursor candidates
  sync      -c FILE [--once] [--interval SECONDS] [--progress SECONDS] [--metrics ADDR]
                             run the sync; a stopped or crashed sync resumes where it left off.
                             Pipelines with cdc streams keep applying changes until stopped
                             (SIGINT/SIGTERM), committing at least every --interval seconds
                             (default 5; cdc streams only: one replication session throughout;
                             mixed with other modes: a round every --interval); --once reads up
                             to the source's current end, commits and exits. A load shows a
                             live line on a terminal (rows, rows/s, chunks, time left); piped,
                             a progress line every --progress seconds (default 10; 0: none).
                             --metrics ADDR (host:port, or the pipeline's metrics.listen) serves
                             /metrics (Prometheus), /healthz and /readyz while it runs
  state     -c FILE [--json] show each stream's state, its marker in the destination, and what
                             the next sync will do (run normally, repair the state, start fresh)
  maintain  -c FILE [--table T ...] [--no-compact] [--no-expire] [--no-orphans]
            [--expire-older-than DURATION] [--retain-last N] [--orphans-older-than DURATION]
                             compact each table's small data files and fold its delete files
                             into rewritten data files, then expire old snapshots and delete the
                             files only they referenced, then delete the orphan files (no
                             metadata references them) older than --orphans-older-than (default
                             3d; longer than any sync) and abort such multipart uploads. Readers
                             see the same rows before and after. DURATION: 0s, 90m, 12h, 5d
                             (expiry's default: the table property
                             history.expire.max-snapshot-age-ms, 5 days); --retain-last keeps the
                             newest N snapshots of each branch (default 1)
  verify    -c FILE [--table T ...] [--json]
                             compare each stream's source table with its Iceberg table (main, as
                             readers see it): row counts and a per-key hash of every column; print
                             the first differing keys. Exit 0 when every table matches, 1 on any
                             difference
  catalog serve -c FILE [--listen ADDR]
  catalog serve --warehouse W [--catalog URI] [--catalog-name N] [--listen ADDR]
                [--vend-credentials]
                             serve the Iceberg catalog of the pipeline's destination (or the
                             one of --catalog and --warehouse) over the Iceberg REST catalog
                             protocol, so that DuckDB, pyiceberg, Spark and Trino attach to the
                             lake; until SIGINT/SIGTERM. See `ferry catalog --help`
  faults                     list the named fault points (FERRY_FAULT=<point>[:<n>])
  version                    print the version (also --version)

options:
  -c, --config FILE   the pipeline file (YAML)
  -v, --verbose       debug logging
  -q, --quiet         warnings and errors only
  --log-format F      text (default; each line with its UTC date and time) or json (one
                      object per line: time, level, pipeline, message)
)";

const char* kCatalogUsage =
    R"(usage: ferry catalog serve -c FILE [--listen ADDR] [--vend-credentials]
       ferry catalog serve --warehouse W [--catalog URI] [--catalog-name N] [--listen ADDR]
                           [--vend-credentials]

Serves an Iceberg SQL catalog and its warehouse over the Iceberg REST catalog protocol, so that
DuckDB, pyiceberg, Spark, Trino, iceberg-js and ferry's own REST client attach to the lake with
nothing else installed. Runs until SIGINT/SIGTERM. Clients use the URL of the line it prints
when ready ("... on http://HOST:PORT").

options:
  -c, --config FILE    serve the catalog of this pipeline's Iceberg destination (its warehouse,
                       catalog and catalog_name keys)
  --warehouse W        without a pipeline file: the warehouse (a folder or s3://bucket/prefix)
  --catalog URI        its SQL catalog: sqlite:PATH or a postgresql:// URL (default for a local
                       warehouse: sqlite:<warehouse>/catalog.db, as the Iceberg destination's)
  --catalog-name N     the catalog_name the tables are recorded under (default ferry); also the
                       REST prefix clients send
  --listen ADDR        host:port to listen on (default 127.0.0.1:8181; port 0 picks a free one)
  --vend-credentials   an s3:// warehouse: hand clients that ask for vended credentials
                       (X-Iceberg-Access-Delegation) the S3 credentials this server uses, with
                       its endpoint and region, so they need none of their own. Use with a
                       token, on a network you trust: they are the server's own, not scoped
                       or expiring ones

environment:
  FERRY_CATALOG_TOKEN  a secret every client must send as "Authorization: Bearer <token>";
                       required to listen on anything but a loopback address
)";

struct Args {
  std::string command;
  std::string subcommand;  // catalog: serve
  std::string config;
  bool json = false;
  bool once = false;
  int progress_s = 10;  // sync: seconds between progress lines of a load off a terminal
  int interval_s = 5;
  std::string metrics;  // sync: --metrics ADDR
  // maintain
  std::vector<std::string> tables;
  bool compact = true;
  bool expire = true;
  std::optional<int64_t> expire_older_than_ms;
  std::optional<int64_t> retain_last;
  bool orphans = true;
  int64_t orphans_older_than_ms = 3LL * 24 * 3600 * 1000;
  bool maintain_options = false;
  // catalog serve
  std::string listen;
  std::string catalog_uri;
  std::string warehouse;
  std::string catalog_name;
  bool vend_credentials = false;
};

// The help on stdout (no error), or the one line that was wrong and where the help is: a
// mistake on the command line does not bury its cause under the whole help.
int Usage(const std::string& error) {
  if (error.empty()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "ferry: %s\nrun 'ferry --help' for the commands and their options\n",
               error.c_str());
  return 2;
}

// What the command itself tells the operator (not the log of the work): "ferry: ..." lines, or
// with --log-format json a log line of their own, so that every line of stderr parses.
void Say(LogLevel level, const std::string& text) {
  if (GetLogFormat() == LogFormat::kJson) {
    LogLine(level, text);
    return;
  }
  std::fprintf(stderr, "ferry: %s%s\n", level == LogLevel::kError ? "error: " : "", text.c_str());
}

int Fail(const Status& s, int code = 1) {
  Say(LogLevel::kError, s.message());
  return code;
}

// Configuration mistakes exit 2, failures of the work exit 1.
int ExitCodeFor(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ? 2 : 1;
}

// "3d", "12h", "90m", "30s", "500ms": the largest unit that divides the duration.
std::string HumanDuration(int64_t ms) {
  const std::pair<int64_t, const char*> units[] = {
      {86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}};
  for (const auto& [n, unit] : units) {
    if (ms > 0 && ms % n == 0) return std::to_string(ms / n) + unit;
  }
  return std::to_string(ms) + "ms";
}

std::string HumanBytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

Result<config::PipelineConfig> LoadConfig(const Args& a) {
  if (a.config.empty()) {
    return Status::InvalidArgument("'" + a.command + "' needs the pipeline file: -c FILE");
  }
  auto cfg = config::LoadPipelineFile(a.config);
  if (cfg.ok()) SetLogPipeline(cfg->name);
  return cfg;
}

int CmdCheck(const Args& a) {
  auto cfg = LoadConfig(a);
  if (!cfg.ok()) return Fail(cfg.status(), 2);
  engine::CheckReport r;
  Status s = engine::RunCheck(*cfg, &r);
  if (!s.ok()) return Fail(s, ExitCodeFor(s));
  std::printf("pipeline:     %s (%s)\n", cfg->name.c_str(), cfg->file.c_str());
  std::printf("source:       %s\n", r.source.c_str());
  std::printf("destination:  %s\n", r.destination.c_str());
  std::printf("guarantee:    %s\n", r.guarantee.c_str());
  std::printf("state:        %s\n", cfg->state_path.c_str());
  std::printf("streams:      %zu\n", r.streams.size());
  for (size_t i = 0; i < r.streams.size(); ++i) {
    const auto& s2 = r.streams[i];
    std::printf("  %-28s -> %-32s %s, %zu columns, key %s, split by %s\n", s2.name.c_str(),
                r.tables[i].c_str(), r.modes[i].c_str(), s2.columns.size(),
                s2.primary_key.empty() ? "(none)" : [&] {
                  std::string k;
                  for (const auto& c : s2.primary_key) k += (k.empty() ? "" : ",") + c;
                  return k;
                }().c_str(),
                s2.chunking.c_str());
    if (!r.partitioning[i].empty()) {
      std::printf("  %-28s    partitioned: %s\n", "", r.partitioning[i].c_str());
    }
    if (!r.transforms[i].empty()) {
      std::printf("  %-28s    transforms: %s\n", "", r.transforms[i].c_str());
    }
    if (!r.merged[i].empty()) std::printf("  %-28s    merged: %s\n", "", r.merged[i].c_str());
  }
  std::printf("OK\n");
  return 0;
}

int CmdDiscover(const Args& a) {
  auto cfg = LoadConfig(a);
  if (!cfg.ok()) return Fail(cfg.status(), 2);
  auto found = engine::RunDiscover(*cfg);
  if (!found.ok()) return Fail(found.status(), ExitCodeFor(found.status()));
  const std::vector<source::StreamInfo>& streams = found->streams;
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < streams.size(); ++i) {
      const source::StreamInfo& s = streams[i];
      nlohmann::json cols = nlohmann::json::array();
      for (const auto& c : s.columns) {
        cols.push_back(
            {{"name", c.name},
             {"source_type", c.source_type},
             {"iceberg_type", c.type.ToIceberg()},
             {"nullable", c.nullable},
             {"primary_key_position", c.pk_position},
             {"error", c.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.error)}});
      }
      out.push_back(
          {{"namespace", s.ns},
           {"name", s.name},
           {"columns", cols},
           {"primary_key", s.primary_key},
           {"cursor_candidates", s.cursor_candidates},
           {"estimated_rows", s.estimated_rows},
           {"chunking", s.chunking},
           {"destination_table", found->destinations[i]},
           {"transforms", found->transforms[i].empty() ? nlohmann::json(nullptr)
                                                       : nlohmann::json(found->transforms[i])},
           {"partitioned", found->partitioning[i].empty() || !s.error.empty()
                               ? nlohmann::json(nullptr)
                               : nlohmann::json(found->partitioning[i])},
           {"error", s.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.error)}});
    }
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    const source::StreamInfo& s = streams[i];
    std::printf("%s.%s  (about %lld rows; full refresh split by %s)\n", s.ns.c_str(),
                s.name.c_str(), static_cast<long long>(s.estimated_rows), s.chunking.c_str());
    std::printf("  %-24s %-20s %-16s %-9s %s\n", "column", "source type", "iceberg type",
                "nullable", "key");
    for (const auto& c : s.columns) {
      std::printf("  %-24s %-20s %-16s %-9s %s\n", c.name.c_str(),
                  c.source_type.empty() ? "(none)" : c.source_type.c_str(),
                  c.type.ToIceberg().c_str(), c.nullable ? "yes" : "no",
                  c.pk_position ? std::to_string(c.pk_position).c_str() : "");
    }
    std::string cands;
    for (const auto& c : s.cursor_candidates) cands += (cands.empty() ? "" : ", ") + c;
    std::printf("  cursor candidates: %s\n", cands.empty() ? "(none)" : cands.c_str());
    if (found->destinations[i] != s.name) {
      std::printf("  destination table: %s\n", found->destinations[i].c_str());
    }
    if (!found->transforms[i].empty()) {
      std::printf("  transforms: %s\n", found->transforms[i].c_str());
    }
    if (!found->partitioning[i].empty() && s.error.empty()) {
      std::printf("  partitioned: %s\n", found->partitioning[i].c_str());
    }
    if (!s.error.empty()) std::printf("  cannot be synced: %s\n", s.error.c_str());
    std::printf("\n");
  }
  return 0;
}

void PrintReport(const engine::SyncReport& report) {
  std::printf("%-24s %-32s %-36s %12s %6s %11s %8s\n", "stream", "table", "action", "rows", "files",
              "bytes", "seconds");
  uint64_t rows = 0, files = 0, bytes = 0;
  for (const auto& r : report.streams) {
    std::printf("%-24s %-32s %-36s %12llu %6llu %11s %8.2f\n", r.stream.c_str(), r.table.c_str(),
                r.action.c_str(), static_cast<unsigned long long>(r.rows),
                static_cast<unsigned long long>(r.files), HumanBytes(r.bytes).c_str(), r.seconds);
    rows += r.rows;
    files += r.files;
    bytes += r.bytes;
  }
  std::printf("%-24s %-32s %-36s %12llu %6llu %11s %8.2f\n", "total", "", "",
              static_cast<unsigned long long>(rows), static_cast<unsigned long long>(files),
              HumanBytes(bytes).c_str(), report.seconds);
  std::fflush(stdout);
}

bool IsCdc(config::SyncMode m) {
  return m == config::SyncMode::kCdc || m == config::SyncMode::kCdcOnly;
}

bool HasCdcStreams(const config::SourceConfig& src) {
  if (src.all_streams) return IsCdc(src.mode);
  return std::any_of(src.streams.begin(), src.streams.end(),
                     [](const config::StreamConfig& s) { return IsCdc(s.mode); });
}

bool OnlyCdcStreams(const config::SourceConfig& src) {
  const bool rest = src.all_streams ? IsCdc(src.mode) : !src.streams.empty();
  return rest && std::all_of(src.streams.begin(), src.streams.end(),
                             [](const config::StreamConfig& s) { return IsCdc(s.mode); });
}

bool HasCdcStreams(const config::PipelineConfig& cfg) {
  return std::any_of(cfg.sources.begin(), cfg.sources.end(),
                     [](const config::SourceConfig& s) { return HasCdcStreams(s); });
}

bool OnlyCdcStreams(const config::PipelineConfig& cfg) {
  return std::all_of(cfg.sources.begin(), cfg.sources.end(),
                     [](const config::SourceConfig& s) { return OnlyCdcStreams(s); });
}

// What /readyz answers: ready while the last round reached the source and the destination and
// did not fail, and the last checkpoint (or round) is no older than metrics.ready_within.
class Readiness {
 public:
  void Round(const Status& s, bool connected) {
    std::lock_guard<std::mutex> lock(mu_);
    if (s.ok()) {
      failure_.clear();
      last_round_ = metrics::UnixNow();
    } else {
      failure_ = connected ? "the last round failed: " + s.message()
                           : "the source or the destination cannot be reached: " + s.message();
      failed_at_ = metrics::UnixNow();
    }
  }
  metrics::Readiness Now(int64_t ready_within_ms) {
    std::lock_guard<std::mutex> lock(mu_);
    const double last = std::max(last_round_, metrics::Metrics::Get().LastCheckpoint());
    // A checkpoint after the failure means the retry got through.
    if (!failure_.empty() && last <= failed_at_) return {false, failure_};
    if (last == 0) return {false, "no checkpoint has completed yet"};
    const double age = metrics::UnixNow() - last;
    if (age * 1000 > static_cast<double>(ready_within_ms)) {
      return {false, "the last checkpoint completed " + std::to_string(static_cast<int64_t>(age)) +
                         " s ago (metrics.ready_within: " + HumanDuration(ready_within_ms) + ")"};
    }
    return {true, ""};
  }

 private:
  std::mutex mu_;
  std::string failure_;
  double failed_at_ = 0;
  double last_round_ = 0;
};

int CmdSync(const Args& a) {
  auto cfg = LoadConfig(a);
  if (!cfg.ok()) return Fail(cfg.status(), 2);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  engine::SyncOptions opts;
  opts.stop = &g_stop;
  opts.print_progress = GetLogLevel() <= LogLevel::kInfo;
  // Loads show a live line on a terminal; piped or logged, a line every --progress seconds.
  opts.progress_tty =
      opts.print_progress && GetLogFormat() == LogFormat::kText && ::isatty(STDERR_FILENO) == 1;
  opts.progress_interval_ms = opts.print_progress ? int64_t{a.progress_s} * 1000 : 0;
  // CDC keeps following the source until stopped; everything else runs once.
  const bool follow = HasCdcStreams(*cfg) && !a.once;
  // A pipeline of cdc streams only follows the change log on one session, committing every
  // --interval; with other streams too, it runs a round every --interval (each incremental
  // window, full refresh and change log read to its end), as --once does once.
  opts.follow = follow && OnlyCdcStreams(*cfg);
  opts.follow_commit_ms = int64_t{a.interval_s} * 1000;
  // One sync of a pipeline at a time: a second one (an overlapping cron run) is refused.
  auto lock = state::PipelineLock::Acquire(cfg->state_path, cfg->name);
  if (!lock.ok()) return Fail(lock.status(), ExitCodeFor(lock.status()));
  // Metrics and health while the sync runs (--metrics, else metrics.listen).
  Readiness readiness;
  const std::string pipeline = cfg->name;
  const int64_t ready_within_ms = cfg->metrics.ready_within_ms;
  std::unique_ptr<metrics::Server> server;
  const std::string listen = a.metrics.empty() ? cfg->metrics.listen : a.metrics;
  if (!listen.empty()) {
    auto started = metrics::Server::Start(
        listen, [&readiness, ready_within_ms] { return readiness.Now(ready_within_ms); });
    if (!started.ok()) return Fail(started.status(), 2);
    server = std::move(*started);
    FERRY_LOG(kInfo) << "serving /metrics, /healthz and /readyz on " << listen
                     << (server->port() > 0 ? " (port " + std::to_string(server->port()) + ")"
                                            : std::string());
  }
  metrics::Metrics& m = metrics::Metrics::Get();
  // The counters exist from the start, at 0 (a rate over them needs the first sample).
  m.Retries(pipeline);
  for (const char* outcome : {"succeeded", "failed", "stopped"}) m.Syncs(pipeline, outcome);
  int reruns = 0;
  int retries = 0;
  // Whether any round reached every source and the destination. Until one has, a server that
  // cannot be reached is most likely a wrong address or a server that is not running: a couple
  // of quick attempts, then the error with its hint. Connections lost later are retried up to
  // checkpoint.tolerable_failures times.
  bool ever_connected = false;
  constexpr int kRetriesBeforeFirstConnection = 2;
  for (;;) {
    engine::SyncReport report;
    // Each round reads the pipeline file anew: the round before consumed its options.
    auto round_cfg = follow ? config::LoadPipelineFile(a.config) : std::move(cfg);
    if (!round_cfg.ok()) return Fail(round_cfg.status(), 2);
    const auto round_start = std::chrono::steady_clock::now();
    Status s = engine::RunSync(*round_cfg, opts, &report);
    ever_connected = ever_connected || report.connected;
    readiness.Round(s, report.connected);
    m.Syncs(pipeline, s.ok() ? "succeeded"
                      : g_stop.requested() && (s.code() == StatusCode::kCancelled || s.retryable())
                          ? "stopped"
                          : "failed")
        .Increment();
    if (s.ok()) m.LastSync(pipeline).Set(metrics::UnixNow());
    // A round that ran a long while (following the log) before it failed was not one of a
    // series of failures in a row.
    if (std::chrono::steady_clock::now() - round_start > std::chrono::minutes(1)) retries = 0;
    if (s.ok() && !report.rerun.empty() && !g_stop.requested()) {
      // Stopped early at a consistent point (e.g. columns changed in the change log): what
      // came before is committed; the next round rediscovers and goes on at once.
      PrintReport(report);
      if (++reruns > 100) {
        return Fail(
            Status::Internal("the sync asked to run again 100 times in a row: " + report.rerun), 1);
      }
      FERRY_LOG(kInfo) << "running again at once: " << report.rerun;
      if (!follow) cfg = config::LoadPipelineFile(a.config);
      continue;
    }
    reruns = 0;
    const int tolerable = ever_connected ? round_cfg->checkpoint.tolerable_failures
                                         : std::min(round_cfg->checkpoint.tolerable_failures,
                                                    kRetriesBeforeFirstConnection);
    if (!s.ok() && s.retryable() && !g_stop.requested() && retries >= tolerable &&
        !ever_connected && tolerable > 0) {
      Say(LogLevel::kWarn, "giving up after " + std::to_string(retries + 1) +
                               " attempts: this run never reached every source and the "
                               "destination (connections lost once running are retried up to "
                               "checkpoint.tolerable_failures times)");
    }
    if (!s.ok() && s.retryable() && !g_stop.requested() && retries < tolerable) {
      // A server went away (restart, failover, a terminated connection), or a commit lost to
      // another writer (a deadlock, a lock wait timeout, a catalog race): nothing half-done
      // stays; try again with backoff.
      int wait_s = std::min(30, 1 << std::min(retries, 5));
      ++retries;
      m.Retries(pipeline).Increment();
      Say(LogLevel::kWarn, s.ToString() + "; retrying in " + std::to_string(wait_s) + " s");
      for (int i = 0; i < wait_s * 10 && !g_stop.requested(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (!follow) cfg = config::LoadPipelineFile(a.config);
      if (!g_stop.requested()) continue;
      // Stopped while waiting to try again: nothing is in flight, what was committed stays.
      Say(LogLevel::kInfo,
          "stopped on request while waiting to retry (the last attempt: " + s.message() +
              "); what was committed stays, and the next sync resumes from "
              "there");
      return 0;
    }
    if (s.ok()) retries = 0;
    if (!s.ok()) {
      // Stopped on request: a read cut short, or an attempt that failed on a lost server while
      // the stop came; nothing half-done stays either way.
      if (g_stop.requested() && (s.code() == StatusCode::kCancelled || s.retryable())) {
        Say(LogLevel::kInfo,
            "stopped on request; what was committed stays, and the next sync resumes from there");
        return 0;
      }
      return Fail(s, ExitCodeFor(s));
    }
    PrintReport(report);
    if (!follow) return 0;
    // Wait for the next round, waking up at once on a stop request.
    for (int i = 0; i < a.interval_s * 10 && !g_stop.requested(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (g_stop.requested()) {
      Say(LogLevel::kInfo, "stopped on request after a complete round");
      return 0;
    }
  }
}

// A change-log position of a progress record as the logs print it ("0/16D8A38", "#42").
std::string PositionText(const nlohmann::json& p, const char* field, source::Position::Kind kind) {
  if (!p.contains(field)) return "?";
  auto at = source::Position::FromJson(p[field], kind, field);
  return at.ok() ? at->ToString() : p[field].dump();
}

std::string ProgressText(const nlohmann::json& p, source::Position::Kind kind) {
  if (p.is_null()) return "(none)";
  if (p.value("mode", "") == "cdc") {
    return "changes applied up to " + PositionText(p, "position", kind) + " (since " +
           PositionText(p, "from", kind) + ")" + (p.value("landed", false) ? ", landed" : "");
  }
  if (p.value("mode", "") == "incremental") {
    std::string ties;
    if (p.contains("ties") && p["ties"].is_object() && p["ties"].contains("rows")) {
      ties = ", " + p["ties"]["rows"].dump() + " row(s) at it committed" +
             (p["ties"].contains("fingerprints") ? "" : " (digest only)");
    }
    return "cursor " + p.value("cursor_column", std::string("?")) + " = " +
           (p.contains("cursor") ? p["cursor"].dump() : "null") + ties + " (window " +
           p.value("window", std::string("")) + ")";
  }
  if (p.value("mode", "") == "full_refresh") {
    int64_t done = 0;
    for (const auto& r : p.value("committed", nlohmann::json::array())) {
      if (r.is_array() && r.size() == 2) done += r[1].get<int64_t>() - r[0].get<int64_t>();
    }
    int64_t total = p.contains("plan") ? p["plan"].value("count", int64_t{0}) : 0;
    return "run " + p.value("run", std::string("?")) + ", " + std::to_string(done) + "/" +
           std::to_string(total) + " chunks committed, " +
           (p.value("published", false) ? "published" : "loading") + ", " +
           std::to_string(p.value("rows", int64_t{0})) + " rows" +
           (p.contains("cdc_start") ? ", changes from " + PositionText(p, "cdc_start", kind)
                                    : std::string());
  }
  return p.dump();
}

int CmdState(const Args& a) {
  auto cfg = LoadConfig(a);
  if (!cfg.ok()) return Fail(cfg.status(), 2);
  std::vector<engine::StreamStateReport> streams;
  Status s = engine::RunStateReport(*cfg, &streams);
  if (!s.ok()) return Fail(s, ExitCodeFor(s));
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : streams) {
      out.push_back({{"stream", r.stream},
                     {"table", r.table},
                     {"mode", r.mode},
                     {"state", r.state},
                     {"marker", r.marker},
                     {"next_sync", r.restart},
                     {"state_behind_marker", r.state_behind}});
    }
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("state file: %s\n\n", cfg->state_path.c_str());
  for (const auto& r : streams) {
    std::printf("%s -> %s (%s)\n", r.stream.c_str(), r.table.c_str(), r.mode.c_str());
    std::printf("  state:     %s\n", ProgressText(r.state, r.position_kind).c_str());
    std::printf("  marker:    %s\n", ProgressText(r.marker, r.position_kind).c_str());
    std::printf("  next sync: %s\n\n", r.restart.c_str());
  }
  return 0;
}

int CmdMaintain(const Args& a) {
  auto cfg = LoadConfig(a);
  if (!cfg.ok()) return Fail(cfg.status(), 2);
  if (cfg->destination.type != "iceberg") {
    return Fail(Status::InvalidArgument(
                    "ferry maintain compacts Iceberg tables and expires their snapshots; the " +
                    cfg->destination.type +
                    " destination applies every change in place and needs no maintenance"),
                2);
  }
  // The warehouse alone (no sink): its tables are loaded through its FileIO.
  auto dst = sink::IcebergWarehouse::Open(cfg->destination, cfg->name);
  if (!dst.ok()) return Fail(dst.status().WithContext("destination"), ExitCodeFor(dst.status()));
  const sink::IcebergOptions& o = (*dst)->options();
  std::vector<std::string> tables = a.tables;
  if (tables.empty()) {
    auto listed = (*dst)->ListTables();
    if (!listed.ok()) return Fail(listed.status().WithContext("listing the tables of " + o.ns));
    tables = std::move(*listed);
    if (tables.empty()) {
      std::printf("namespace %s has no tables yet: nothing to maintain\n", o.ns.c_str());
      return 0;
    }
  }
  lake::CompactionOptions copts;
  copts.target_file_bytes = o.target_file_bytes;
  copts.parquet = o.parquet;
  lake::ExpireOptions eopts;
  eopts.max_snapshot_age_ms = a.expire_older_than_ms;
  eopts.min_snapshots_to_keep = a.retain_last;
  int failed = 0;
  for (const auto& name : tables) {
    const lake::TableIdent ident{o.ns, name};
    std::printf("table %s\n", ident.ToString().c_str());
    auto t = (*dst)->LoadTable(name);
    if (!t.ok()) {
      if (t.status().code() == StatusCode::kNotFound) {
        Say(LogLevel::kError, "table " + ident.ToString() + " is not in the catalog (" +
                                  (*dst)->catalog()->Describe() +
                                  "): check --table, or run ferry sync first");
        return 2;
      }
      Say(LogLevel::kError, t.status().message());
      ++failed;
      continue;
    }
    if (a.compact) {
      auto r = lake::CompactTable(**t, copts);
      if (!r.ok()) {
        Say(LogLevel::kError, "compacting " + ident.ToString() + ": " + r.status().message());
        ++failed;
        continue;
      }
      if (!r->committed) {
        std::printf("  compact: nothing to rewrite (%lld data files, %lld delete files, %s)%s\n",
                    static_cast<long long>(r->data_files_before),
                    static_cast<long long>(r->delete_files_before),
                    HumanBytes(static_cast<uint64_t>(r->bytes_before)).c_str(),
                    r->groups_given_up > 0 ? "; the files changed while it ran: run it again" : "");
      } else {
        std::printf(
            "  compact: %lld data + %lld delete files, %lld records, %s -> %lld data + %lld "
            "delete files, %lld records, %s\n",
            static_cast<long long>(r->data_files_before),
            static_cast<long long>(r->delete_files_before),
            static_cast<long long>(r->records_before),
            HumanBytes(static_cast<uint64_t>(r->bytes_before)).c_str(),
            static_cast<long long>(r->data_files_after),
            static_cast<long long>(r->delete_files_after), static_cast<long long>(r->records_after),
            HumanBytes(static_cast<uint64_t>(r->bytes_after)).c_str());
        std::printf(
            "           rewrote %lld files into %lld (%lld rows read, %lld removed by deletes), "
            "dropped %lld delete files; snapshot %lld%s\n",
            static_cast<long long>(r->rewritten_data_files),
            static_cast<long long>(r->written_data_files), static_cast<long long>(r->rows_read),
            static_cast<long long>(r->rows_dropped),
            static_cast<long long>(r->removed_delete_files),
            static_cast<long long>(*r->snapshot_id),
            r->groups_given_up > 0 ? " (some groups changed while it ran and were left)" : "");
      }
    }
    if (a.expire) {
      auto r = lake::ExpireSnapshots(**t, eopts);
      if (!r.ok()) {
        Say(LogLevel::kError,
            "expiring snapshots of " + ident.ToString() + ": " + r.status().message());
        ++failed;
        continue;
      }
      if (!r->committed) {
        std::printf("  expire:  nothing to expire (%lld snapshots)\n",
                    static_cast<long long>(r->snapshots_before));
      } else {
        std::printf(
            "  expire:  %lld of %lld snapshots expired; deleted %lld manifest lists, %lld "
            "manifests, %lld data files, %lld delete files (%s)\n",
            static_cast<long long>(r->snapshots_expired),
            static_cast<long long>(r->snapshots_before),
            static_cast<long long>(r->manifest_lists_deleted),
            static_cast<long long>(r->manifests_deleted),
            static_cast<long long>(r->data_files_deleted),
            static_cast<long long>(r->delete_files_deleted),
            HumanBytes(static_cast<uint64_t>(r->bytes_deleted)).c_str());
        if (r->files_not_deleted > 0) {
          std::printf("           %lld files could not be deleted (see the warnings above)\n",
                      static_cast<long long>(r->files_not_deleted));
        }
      }
    }
    if (a.orphans) {
      lake::OrphanOptions oopts;
      oopts.older_than_ms = a.orphans_older_than_ms;
      auto r = lake::RemoveOrphanFiles(**t, oopts);
      if (!r.ok()) {
        Say(LogLevel::kError,
            "removing orphan files of " + ident.ToString() + ": " + r.status().message());
        ++failed;
        continue;
      }
      std::printf(
          "  orphans: %lld of %lld files unreferenced and older than %s: deleted (%s), %lld "
          "newer kept; %lld open uploads aborted\n",
          static_cast<long long>(r->orphans_deleted), static_cast<long long>(r->files_listed),
          HumanDuration(a.orphans_older_than_ms).c_str(),
          HumanBytes(static_cast<uint64_t>(r->bytes_deleted)).c_str(),
          static_cast<long long>(r->orphans_too_young), static_cast<long long>(r->uploads_aborted));
      if (r->files_not_deleted > 0) {
        std::printf("           %lld files could not be deleted (see the warnings above)\n",
                    static_cast<long long>(r->files_not_deleted));
      }
    }
    std::fflush(stdout);
  }
  return failed == 0 ? 0 : 1;
}

const char* DiffKindText(engine::DiffKind k) {
  switch (k) {
    case engine::DiffKind::kMissing:
      return "missing in destination";
    case engine::DiffKind::kExtra:
      return "extra in destination";
    case engine::DiffKind::kDifferent:
      return "different values";
  }
  return "?";
}

int CmdVerify(const Args& a) {
  auto cfg = LoadConfig(a);
  if (!cfg.ok()) return Fail(cfg.status(), 2);
  engine::VerifyOptions opts;
  opts.tables = a.tables;
  std::vector<engine::TableVerify> tables;
  Status s = engine::RunVerify(*cfg, opts, &tables);
  if (!s.ok()) return Fail(s, ExitCodeFor(s));
  size_t differing = 0;
  for (const auto& t : tables) differing += t.matches() ? 0 : 1;
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : tables) {
      nlohmann::json examples = nlohmann::json::array();
      for (const auto& e : t.examples) {
        examples.push_back({{"kind", DiffKindText(e.kind)},
                            {"key", e.key},
                            {"columns", e.columns},
                            {"why", e.why}});
      }
      out.push_back(
          {{"stream", t.stream},
           {"table", t.table},
           {"mode", t.mode},
           {"matches", t.matches()},
           {"key", t.key},
           {"table_missing", t.table_missing},
           {"destination_version", t.version},
           {"source_rows", t.source_rows},
           {"destination_rows", t.destination_rows},
           {"missing", t.missing},
           {"extra", t.extra},
           {"different", t.different},
           {"pending", t.pending},
           {"source_only_columns", t.source_only_columns},
           {"destination_only_columns", t.destination_only_columns},
           {"type_differences", t.type_differences},
           {"examples", examples},
           {"notes", t.notes},
           {"error", t.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.error)}});
    }
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return differing == 0 ? 0 : 1;
  }
  for (const auto& t : tables) {
    if (!t.error.empty()) {
      std::printf("%s: could not be verified: %s\n", t.table.c_str(), t.error.c_str());
      continue;
    }
    std::printf(
        "%s: source %llu rows, destination %llu rows, %llu missing, %llu extra, %llu "
        "different: %s\n",
        t.table.c_str(), static_cast<unsigned long long>(t.source_rows),
        static_cast<unsigned long long>(t.destination_rows),
        static_cast<unsigned long long>(t.missing), static_cast<unsigned long long>(t.extra),
        static_cast<unsigned long long>(t.different), t.matches() ? "match" : "DIFFERENT");
    if (t.table_missing) std::printf("  the destination has no such table\n");
    for (const auto& c : t.source_only_columns) {
      std::printf("  column %s is in the source but not in the destination\n", c.c_str());
    }
    for (const auto& c : t.destination_only_columns) {
      std::printf("  column %s is only in the destination (not compared)\n", c.c_str());
    }
    for (const auto& c : t.type_differences) {
      std::printf("  column types differ: %s\n", c.c_str());
    }
    for (const auto& e : t.examples) {
      std::printf("  %s: %s", DiffKindText(e.kind), e.key.c_str());
      if (!e.columns.empty()) {
        std::string cols;
        for (const auto& c : e.columns) cols += (cols.empty() ? "" : "; ") + c;
        std::printf(" (columns: %s)", cols.c_str());
      }
      if (!e.why.empty()) std::printf(" [%s]", e.why.c_str());
      std::printf("\n");
    }
    const uint64_t shown = t.examples.size();
    const uint64_t total = t.missing + t.extra + t.different;
    if (total > shown) {
      std::printf("  ... and %llu more\n", static_cast<unsigned long long>(total - shown));
    }
    for (const auto& n : t.notes) std::printf("  note: %s\n", n.c_str());
  }
  std::printf("%zu of %zu tables match\n", tables.size() - differing, tables.size());
  return differing == 0 ? 0 : 1;
}

// The catalog `ferry catalog serve` serves, opened from a pipeline's Iceberg destination or
// from --warehouse and --catalog.
struct ServedLake {
  std::unique_ptr<sink::IcebergWarehouse> destination;  // with -c
  std::unique_ptr<lake::Catalog> catalog;               // without
  lake::Catalog* served = nullptr;
  std::shared_ptr<lake::FileIO> io;  // the warehouse's
  std::string warehouse;             // URI
  std::string catalog_uri;
  std::string catalog_name;
};

Result<ServedLake> OpenPipelineLake(const Args& a) {
  FERRY_ASSIGN_OR_RETURN(config::PipelineConfig cfg, LoadConfig(a));
  if (cfg.destination.type != "iceberg") {
    return Status::InvalidArgument(
        "ferry catalog serve serves an Iceberg destination's catalog; the destination of " +
        cfg.file + " is " + cfg.destination.type);
  }
  config::Options peek = cfg.destination.options;  // a copy: Open takes the keys itself
  if (auto c = peek.TakeOptionalString("catalog"); c && lake::IsRestCatalogUri(*c)) {
    return Status::InvalidArgument("the destination's catalog is a REST catalog already (" +
                                   config::Redact(*c) +
                                   "): clients attach to it directly; ferry catalog serve "
                                   "serves SQL catalogs (sqlite:, postgresql://)");
  }
  ServedLake lake;
  auto dst = sink::IcebergWarehouse::Open(cfg.destination, cfg.name);
  if (!dst.ok()) return dst.status().WithContext("destination");
  lake.destination = std::move(*dst);
  const sink::IcebergOptions& o = lake.destination->options();
  lake.served = lake.destination->catalog();
  lake.io = lake.destination->io();
  lake.warehouse = o.warehouse;
  lake.catalog_uri = o.catalog_uri;
  lake.catalog_name = o.catalog_name;
  return lake;
}

Result<ServedLake> OpenFlagLake(const Args& a) {
  if (a.warehouse.empty()) {
    return Status::InvalidArgument(
        "ferry catalog serve needs the pipeline file (-c FILE) or the warehouse (--warehouse "
        "W, with --catalog URI unless the catalog is <warehouse>/catalog.db)");
  }
  ServedLake lake;
  lake.warehouse =
      lake::SchemeOf(a.warehouse).empty() ? lake::ToUri(AbsolutePath(a.warehouse)) : a.warehouse;
  lake.catalog_name = a.catalog_name.empty() ? "ferry" : a.catalog_name;
  auto io = lake::OpenFileIO(lake.warehouse);
  if (!io.ok()) return io.status().WithContext("--warehouse");
  if (a.catalog_uri.empty()) {
    auto folder = lake::LocalPath(lake.warehouse);
    if (!folder.ok()) {
      return Status::InvalidArgument("the warehouse " + lake.warehouse +
                                     " is not a local folder: give its catalog with --catalog "
                                     "(sqlite:PATH or a postgresql:// URL)");
    }
    lake.catalog_uri = "sqlite:" + JoinPath(*folder, "catalog.db");
  } else if (lake::IsRestCatalogUri(a.catalog_uri)) {
    return Status::InvalidArgument("--catalog " + config::Redact(a.catalog_uri) +
                                   " is a REST catalog already: clients attach to it directly");
  } else if (a.catalog_uri.rfind("sqlite:", 0) == 0 && a.catalog_uri.size() > 7 &&
             a.catalog_uri[7] != '/') {
    lake.catalog_uri = "sqlite:" + AbsolutePath(a.catalog_uri.substr(7));
  } else {
    lake.catalog_uri = a.catalog_uri;
  }
  lake.io = *io;
  auto catalog = lake::OpenSqlCatalog(lake.catalog_uri, lake.catalog_name, *io);
  if (!catalog.ok()) return catalog.status().WithContext("opening the catalog");
  lake.catalog = std::move(*catalog);
  lake.served = lake.catalog.get();
  return lake;
}

int CmdCatalog(const Args& a) {
  if (a.subcommand != "serve") {
    const std::string error =
        a.subcommand.empty()
            ? "ferry catalog needs a subcommand: serve"
            : "ferry catalog has one subcommand, serve, not '" + a.subcommand + "'";
    std::fprintf(stderr, "ferry: %s\n\n%s", error.c_str(), kCatalogUsage);
    return 2;
  }
  if (!a.config.empty() &&
      (!a.warehouse.empty() || !a.catalog_uri.empty() || !a.catalog_name.empty())) {
    return Usage(
        "give either the pipeline file (-c) or --warehouse/--catalog/--catalog-name, not both");
  }
  auto lake = a.config.empty() ? OpenFlagLake(a) : OpenPipelineLake(a);
  if (!lake.ok()) return Fail(lake.status(), ExitCodeFor(lake.status()));
  catalog_server::ServeOptions opts;
  if (!a.listen.empty()) opts.listen = a.listen;
  opts.prefix = lake->catalog_name;
  opts.warehouse = lake->warehouse;
  const char* token = std::getenv("FERRY_CATALOG_TOKEN");
  opts.token = token ? token : "";
  if (a.vend_credentials) {
    auto s3 = lake::S3SettingsOf(*lake->io);
    if (!s3) {
      return Usage("--vend-credentials hands clients the S3 credentials of an s3:// warehouse; " +
                   lake->warehouse + " is not on S3");
    }
    opts.vended = {{"s3.access-key-id", s3->credentials.access_key_id},
                   {"s3.secret-access-key", s3->credentials.secret_access_key},
                   {"s3.endpoint", s3->endpoint},
                   {"s3.path-style-access", s3->path_style ? "true" : "false"},
                   {"client.region", s3->region}};
    if (!s3->credentials.session_token.empty()) {
      opts.vended["s3.session-token"] = s3->credentials.session_token;
    }
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  auto server = catalog_server::RestCatalogServer::Start(opts, lake->served);
  if (!server.ok()) return Fail(server.status(), 2);
  std::printf("serving the Iceberg REST catalog %s (warehouse %s, prefix %s, %s%s) on %s\n",
              config::Redact(lake->catalog_uri).c_str(), lake->warehouse.c_str(),
              opts.prefix.c_str(),
              opts.token.empty() ? "no token" : "bearer token of FERRY_CATALOG_TOKEN",
              opts.vended.empty() ? "" : ", vending its S3 credentials", (*server)->url().c_str());
  std::fflush(stdout);
  while (!g_stop.requested()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server->reset();  // waits for the requests in flight
  Say(LogLevel::kInfo, "stopped serving the catalog");
  return 0;
}

int CmdFaults() {
  for (const auto& p : AllFaultPoints()) {
    std::printf("%-32s %s\n", std::string(p.name).c_str(), std::string(p.description).c_str());
  }
  return 0;
}

// Open files: a partitioned table keeps one data file open per partition written (up to the
// destination's max_open_files, per stream), past the 1024 many systems start processes with.
// The soft limit is raised toward the hard one, as servers holding many files do.
void RaiseOpenFileLimit() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0) return;
  const rlim_t want =
      l.rlim_max == RLIM_INFINITY ? rlim_t{65536} : std::min<rlim_t>(l.rlim_max, 65536);
  if (l.rlim_cur != RLIM_INFINITY && l.rlim_cur < want) {
    l.rlim_cur = want;
    (void)setrlimit(RLIMIT_NOFILE, &l);
  }
}

int Main(int argc, char** argv) {
  RaiseOpenFileLimit();
  Args a;
  std::vector<std::string> rest(argv + 1, argv + argc);
  for (size_t i = 0; i < rest.size(); ++i) {
    const std::string& w = rest[i];
    if (w == "-c" || w == "--config") {
      if (i + 1 >= rest.size()) return Usage(w + " needs a file");
      a.config = rest[++i];
    } else if (w.rfind("--config=", 0) == 0) {
      a.config = w.substr(9);
    } else if (w == "--json") {
      a.json = true;
    } else if (w == "--once") {
      a.once = true;
    } else if (w == "--interval") {
      if (i + 1 >= rest.size()) return Usage("--interval needs a number of seconds");
      char* end = nullptr;
      long v = std::strtol(rest[++i].c_str(), &end, 10);
      if (end == nullptr || *end != '\0' || v < 1 || v > 86400) {
        return Usage("--interval takes whole seconds from 1 to 86400");
      }
      a.interval_s = static_cast<int>(v);
    } else if (w == "--progress") {
      if (i + 1 >= rest.size()) return Usage("--progress needs a number of seconds");
      char* end = nullptr;
      long v = std::strtol(rest[++i].c_str(), &end, 10);
      if (end == nullptr || *end != '\0' || v < 0 || v > 86400) {
        return Usage("--progress takes whole seconds from 0 (no progress lines) to 86400");
      }
      a.progress_s = static_cast<int>(v);
    } else if (w == "--metrics" || w.rfind("--metrics=", 0) == 0) {
      if (w == "--metrics") {
        if (i + 1 >= rest.size()) return Usage("--metrics needs an address: host:port");
        a.metrics = rest[++i];
      } else {
        a.metrics = w.substr(10);
      }
      if (a.metrics.empty()) return Usage("--metrics needs an address: host:port");
    } else if (w == "--table") {
      if (i + 1 >= rest.size()) return Usage("--table needs a table name");
      a.tables.push_back(rest[++i]);
      a.maintain_options = true;
    } else if (w == "--no-compact") {
      a.compact = false;
      a.maintain_options = true;
    } else if (w == "--no-expire") {
      a.expire = false;
      a.maintain_options = true;
    } else if (w == "--expire-older-than") {
      if (i + 1 >= rest.size()) return Usage("--expire-older-than needs a duration such as 5d");
      a.expire_older_than_ms = config::ParseDurationMs(rest[++i]);
      if (!a.expire_older_than_ms) {
        return Usage(
            "--expire-older-than takes a whole number with a unit: ms, s, m, h or d "
            "(0s, 90m, 12h, 5d); got '" +
            rest[i] + "'");
      }
      a.maintain_options = true;
    } else if (w == "--no-orphans") {
      a.orphans = false;
      a.maintain_options = true;
    } else if (w == "--orphans-older-than") {
      if (i + 1 >= rest.size()) return Usage("--orphans-older-than needs a duration such as 3d");
      auto ms = config::ParseDurationMs(rest[++i]);
      if (!ms) {
        return Usage(
            "--orphans-older-than takes a whole number with a unit: ms, s, m, h or d "
            "(0s, 90m, 12h, 3d); got '" +
            rest[i] + "'");
      }
      a.orphans_older_than_ms = *ms;
      a.maintain_options = true;
    } else if (w == "--retain-last") {
      if (i + 1 >= rest.size()) return Usage("--retain-last needs a number of snapshots");
      char* end = nullptr;
      long v = std::strtol(rest[++i].c_str(), &end, 10);
      if (end == nullptr || *end != '\0' || v < 1 || v > 1000000) {
        return Usage("--retain-last takes a whole number of snapshots from 1 to 1000000");
      }
      a.retain_last = v;
      a.maintain_options = true;
    } else if (w == "--listen" || w == "--catalog" || w == "--warehouse" || w == "--catalog-name" ||
               w.rfind("--listen=", 0) == 0 || w.rfind("--catalog=", 0) == 0 ||
               w.rfind("--warehouse=", 0) == 0 || w.rfind("--catalog-name=", 0) == 0) {
      const size_t eq = w.find('=');
      const std::string flag = w.substr(0, eq);
      std::string value;
      if (eq != std::string::npos) {
        value = w.substr(eq + 1);
      } else if (i + 1 < rest.size()) {
        value = rest[++i];
      }
      if (value.empty()) return Usage(flag + " needs a value");
      if (flag == "--listen") a.listen = value;
      if (flag == "--catalog") a.catalog_uri = value;
      if (flag == "--warehouse") a.warehouse = value;
      if (flag == "--catalog-name") a.catalog_name = value;
    } else if (w == "--vend-credentials") {
      a.vend_credentials = true;
    } else if (w == "--log-format" || w.rfind("--log-format=", 0) == 0) {
      std::string f;
      if (w == "--log-format") {
        if (i + 1 >= rest.size()) return Usage("--log-format needs text or json");
        f = rest[++i];
      } else {
        f = w.substr(13);
      }
      if (f != "text" && f != "json")
        return Usage("--log-format takes text or json, not '" + f + "'");
      SetLogFormat(f == "json" ? LogFormat::kJson : LogFormat::kText);
    } else if (w == "-v" || w == "--verbose") {
      SetLogLevel(LogLevel::kDebug);
    } else if (w == "-q" || w == "--quiet") {
      SetLogLevel(LogLevel::kWarn);
    } else if (w == "-h" || w == "--help" || w == "help") {
      if (a.command == "catalog") {
        std::fputs(kCatalogUsage, stdout);
        return 0;
      }
      return Usage("");
    } else if (w == "--version" || w == "-V") {
      // As `ferry version`.
      if (a.command.empty()) a.command = "version";
    } else if (!w.empty() && w[0] == '-') {
      return Usage("unknown option '" + w + "'");
    } else if (a.command.empty()) {
      a.command = w;
    } else if (a.command == "catalog" && a.subcommand.empty()) {
      a.subcommand = w;
    } else {
      return Usage("unexpected argument '" + w + "'");
    }
  }
  std::string_view fault_error = ArmFaultsFromEnvironment();
  if (!fault_error.empty()) return Fail(Status::InvalidArgument(std::string(fault_error)), 2);
  if (a.command.empty()) {
    std::fprintf(stderr, "ferry: no command given\n\n%s", kUsage);
    return 2;
  }
  if ((a.once || a.interval_s != 5 || a.progress_s != 10 || !a.metrics.empty()) &&
      a.command != "sync") {
    return Usage("--once, --interval, --progress and --metrics go with sync");
  }
  if (a.command == "verify" && a.maintain_options) {
    for (const auto& w : rest) {
      if (w == "--no-compact" || w == "--no-expire" || w == "--expire-older-than" ||
          w == "--retain-last") {
        return Usage(w + " goes with maintain");
      }
    }
  } else if (a.maintain_options && a.command != "maintain") {
    return Usage(
        "--table, --no-compact, --no-expire, --expire-older-than and --retain-last go "
        "with maintain");
  }
  if ((!a.listen.empty() || !a.catalog_uri.empty() || !a.warehouse.empty() ||
       !a.catalog_name.empty()) &&
      a.command != "catalog") {
    return Usage("--listen, --catalog, --warehouse and --catalog-name go with catalog serve");
  }
  if (a.json && a.command != "discover" && a.command != "state" && a.command != "verify") {
    return Usage("--json goes with discover, state and verify");
  }
  if (a.command == "check") return CmdCheck(a);
  if (a.command == "discover") return CmdDiscover(a);
  if (a.command == "sync") return CmdSync(a);
  if (a.command == "state") return CmdState(a);
  if (a.command == "maintain") return CmdMaintain(a);
  if (a.command == "verify") return CmdVerify(a);
  if (a.command == "catalog") return CmdCatalog(a);
  if (a.command == "faults") return CmdFaults();
  if (a.command == "version") {
    std::printf("ferry %s\n", kVersion);
    return 0;
  }
  return Usage("unknown command '" + a.command + "'");
}

}  // namespace
}  // namespace ferry::cli

int main(int argc, char** argv) {
  // Nothing ends the process unexplained: work that throws fails with what it was doing.
  int code = 1;
  ferry::Status s = ferry::graph::RunCatching("ferry", [&] {
    code = ferry::cli::Main(argc, argv);
    return ferry::Status::OK();
  });
  if (!s.ok()) {
    std::fprintf(stderr, "ferry: error: %s\n", s.message().c_str());
    return 1;
  }
  return code;
}
