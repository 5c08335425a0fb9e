#include "ferry/metrics/metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include <prometheus/text_serializer.h>

namespace ferry::metrics {
namespace {

template <typename T>
prometheus::Family<T>* Build(prometheus::detail::Builder<T> builder, prometheus::Registry& r,
                             const char* name, const char* help) {
  return &builder.Name(name).Help(help).Register(r);
}

// Commits take from milliseconds (a local warehouse) to minutes (an object store under load).
const prometheus::Histogram::BucketBoundaries& CommitBuckets() {
  static const prometheus::Histogram::BucketBoundaries b = {
      0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  return b;
}

prometheus::MetricFamily Single(const char* name, const char* help, prometheus::MetricType type,
                                double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(m);
  return f;
}

// The process's own series (the names every Prometheus client library uses), from /proc.
void AppendProcess(std::vector<prometheus::MetricFamily>* out, double start_time) {
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::ifstream statm("/proc/self/statm");
  double size = 0, resident = 0;
  if (statm >> size >> resident) {
    out->push_back(Single("process_resident_memory_bytes", "Resident memory size in bytes.",
                          prometheus::MetricType::Gauge, resident * page));
    out->push_back(Single("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                          prometheus::MetricType::Gauge, size * page));
  }
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (std::getline(stat, line)) {
    // The fields after the command name (which may hold spaces) in parentheses.
    const size_t close = line.rfind(')');
    std::istringstream rest(close == std::string::npos ? "" : line.substr(close + 2));
    std::vector<std::string> f;
    for (std::string w; rest >> w;) f.push_back(w);
    // utime and stime are fields 14 and 15 of stat(5): 12 and 13 after the state (field 3).
    if (f.size() > 13) {
      const double cpu = (std::stod(f[11]) + std::stod(f[12])) / ticks;
      out->push_back(Single("process_cpu_seconds_total",
                            "Total user and system CPU time spent in seconds.",
                            prometheus::MetricType::Counter, cpu));
    }
  }
  if (DIR* d = opendir("/proc/self/fd")) {
    double n = 0;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
    out->push_back(Single("process_open_fds", "Number of open file descriptors.",
                          prometheus::MetricType::Gauge, n - 1));  // less the one reading them
  }
  out->push_back(Single("process_start_time_seconds",
                        "Start time of the process since unix epoch in seconds.",
                        prometheus::MetricType::Gauge, start_time));
}

}  // namespace

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Metrics& Metrics::Get() {
  static Metrics* m = new Metrics();  // never destroyed: series may be updated during exit
  return *m;
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  rows_read_ = Build(BuildCounter(), r, "ferry_rows_read_total",
                     "Rows (and deleted keys) read from the source and handed to the sink.");
  bytes_read_ = Build(BuildCounter(), r, "ferry_read_bytes_total",
                      "Bytes of the values read from the source, as ferry holds them "
                      "(fixed-width values and the bytes of text and binary values).");
  rows_committed_ = Build(BuildCounter(), r, "ferry_rows_committed_total",
                          "Rows (and deleted keys) committed to the destination.");
  chunks_planned_ = Build(BuildGauge(), r, "ferry_load_chunks_planned",
                          "Chunks in the plan of the stream's current load (full refresh or "
                          "backfill).");
  chunks_committed_ = Build(BuildGauge(), r, "ferry_load_chunks_committed",
                            "Chunks of the stream's current load committed (earlier runs' too).");
  rows_planned_ = Build(BuildGauge(), r, "ferry_load_rows_planned",
                        "Rows the source estimated for the stream's current load.");
  bytes_committed_ = Build(BuildCounter(), r, "ferry_committed_bytes_total",
                           "Bytes of the data and delete files committed to the table.");
  commit_seconds_ = Build(prometheus::BuildHistogram(), r, "ferry_commit_duration_seconds",
                          "How long each commit to the destination took.");
  checkpoints_ = Build(BuildCounter(), r, "ferry_checkpoints_total",
                       "Checkpoints of the table by outcome: started, completed (committed and "
                       "recorded in the state file), abandoned (checkpoint.timeout or "
                       "alignment_timeout) or failed.");
  last_checkpoint_ = Build(BuildGauge(), r, "ferry_last_checkpoint_timestamp_seconds",
                           "When the table's last checkpoint completed (Unix time).");
  lag_seconds_ = Build(BuildGauge(), r, "ferry_replication_lag_seconds",
                       "Seconds from the source's commit of the newest transaction every stream "
                       "of the source has committed, to that commit in the destination; 0 when "
                       "the destination has every change the source has logged.");
  log_lag_bytes_ = Build(BuildGauge(), r, "ferry_log_lag_bytes",
                         "Bytes of the source's change log between its end and the position every "
                         "stream has committed (PostgreSQL WAL, MySQL binary log).");
  retained_bytes_ = Build(BuildGauge(), r, "ferry_log_retained_bytes",
                          "Bytes of change log the source keeps for ferry (PostgreSQL: WAL from "
                          "the slot's restart_lsn to the server's current position).");
  confirmed_moved_ = Build(BuildGauge(), r, "ferry_log_confirmed_timestamp_seconds",
                           "When the position every stream of the source has committed last "
                           "moved on (Unix time).");
  log_checkpoints_ = Build(BuildCounter(), r, "ferry_log_checkpoints_total",
                           "Checkpoints the source's change-log read took.");
  alerts_ = Build(BuildGauge(), r, "ferry_alert_active",
                  "1 while an alarm of the pipeline's alerts: section fires (retained_wal, "
                  "stall, lag), else 0.");
  retries_ = Build(BuildCounter(), r, "ferry_retries_total",
                   "Sync rounds that failed retryably (a lost connection) and were tried again.");
  syncs_ = Build(BuildCounter(), r, "ferry_syncs_total",
                 "Sync rounds by outcome: succeeded, failed, stopped.");
  last_sync_ = Build(BuildGauge(), r, "ferry_last_sync_timestamp_seconds",
                     "When the last sync round ended successfully (Unix time).");
  start_time_ = UnixNow();
}

StreamSeries Metrics::Stream(const std::string& pipeline, const std::string& source,
                             const std::string& stream, const std::string& table) {
  const prometheus::Labels l = {
      {"pipeline", pipeline}, {"source", source}, {"stream", stream}, {"table", table}};
  StreamSeries s;
  s.rows_read = &rows_read_->Add(l);
  s.bytes_read = &bytes_read_->Add(l);
  s.rows_committed = &rows_committed_->Add(l);
  s.load_chunks_planned = &chunks_planned_->Add(l);
  s.load_chunks_committed = &chunks_committed_->Add(l);
  s.load_rows_planned = &rows_planned_->Add(l);
  return s;
}

TableSeries Metrics::Table(const std::string& pipeline, const std::string& table) {
  const prometheus::Labels l = {{"pipeline", pipeline}, {"table", table}};
  TableSeries t;
  t.bytes_committed = &bytes_committed_->Add(l);
  t.commit_seconds = &commit_seconds_->Add(l, CommitBuckets());
  static const char* kOutcomes[] = {"started", "completed", "abandoned", "failed"};
  for (size_t i = 0; i < t.checkpoints.size(); ++i) {
    prometheus::Labels o = l;
    o["outcome"] = kOutcomes[i];
    t.checkpoints[i] = &checkpoints_->Add(o);
  }
  t.last_checkpoint = &last_checkpoint_->Add(l);
  return t;
}

SourceSeries Metrics::Source(const std::string& pipeline, const std::string& source) {
  const prometheus::Labels l = {{"pipeline", pipeline}, {"source", source}};
  SourceSeries s;
  s.lag_seconds = &lag_seconds_->Add(l);
  s.log_lag_bytes = &log_lag_bytes_->Add(l);
  s.retained_bytes = &retained_bytes_->Add(l);
  s.confirmed_moved = &confirmed_moved_->Add(l);
  s.checkpoints_read = &log_checkpoints_->Add(l);
  return s;
}

prometheus::Gauge& Metrics::AlertGauge(const std::string& pipeline, const std::string& source,
                                       Alert a) {
  return alerts_->Add(
      {{"pipeline", pipeline}, {"source", source}, {"alert", kAlertNames[static_cast<size_t>(a)]}});
}

prometheus::Counter& Metrics::Retries(const std::string& pipeline) {
  return retries_->Add({{"pipeline", pipeline}});
}

prometheus::Counter& Metrics::Syncs(const std::string& pipeline, const std::string& outcome) {
  return syncs_->Add({{"pipeline", pipeline}, {"outcome", outcome}});
}

prometheus::Gauge& Metrics::LastSync(const std::string& pipeline) {
  return last_sync_->Add({{"pipeline", pipeline}});
}

std::string Metrics::Text() {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  AppendProcess(&families, start_time_);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace ferry::metrics
