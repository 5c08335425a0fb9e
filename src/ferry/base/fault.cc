#include "ferry/base/fault.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "ferry/base/assert.h"

namespace ferry {
namespace {

struct Armed {
  std::string name;
  long nth = 1;
  std::atomic<long> hits{0};
};

Armed* g_armed = nullptr;
std::atomic<bool> g_any{false};
std::once_flag g_once;
std::string g_error;

}  // namespace

const std::vector<FaultPointInfo>& AllFaultPoints() {
  static const std::vector<FaultPointInfo> kPoints = {
      {"source.mid_chunk", "the source has read part of a chunk (hit every 1024 rows)"},
      {"source.mid_transaction",
       "the source has read part of a transaction from the replication stream (hit every 1024 "
       "row changes)"},
      {"source.spilling",
       "held changes past memory_limit were written to a spill file, not yet read back (hit per "
       "file)"},
      {"source.reading_spill",
       "held changes are being read back from spill files into batches (hit every 1024 keys)"},
      {"source.before_acknowledge",
       "every sink committed and the state file is written; the replication slot not yet "
       "acknowledged"},
      {"graph.aligning",
       "a table fed by several sources: one source's barrier has arrived, another's not yet "
       "(its input is held back while the checkpoint aligns)"},
      {"sink.closing_file",
       "a partitioned table: a data file of a partition the rows have left is being closed by the "
       "stream's file closer while the next rows are written (hit per file)"},
      {"sink.data_written", "a chunk's data files are written, nothing committed"},
      {"sink.before_commit", "the catalog commit (data + marker) is about to be sent"},
      {"s3.mid_multipart_upload",
       "an S3 multipart upload of a file has sent a part (hit per part), not yet completed"},
      {"catalog.after_metadata_write",
       "the new metadata file is written, the catalog row not yet swapped"},
      {"catalog.before_transaction_commit",
       "a multi-table commit of the SQL catalog: every table's row is swapped in the open "
       "transaction, COMMIT not yet sent"},
      {"rest.commit_sent",
       "a REST catalog commit request is sent, its response not yet read (the catalog may apply "
       "it or not; the writer learns which by reloading the table)"},
      {"rest.commit_answered",
       "a REST catalog commit was applied and answered, the answer not yet used"},
      {"sink.after_commit", "data and marker are committed, the state file not yet written"},
      {"state.temp_written",
       "the new state file is written to its temporary name, not yet renamed"},
      {"state.after_write", "the state file is written, the source not yet acknowledged"},
      {"sink.before_publish", "all chunks are committed on the load branch, main not yet replaced"},
      {"sink.after_publish", "main now shows the new contents, the state file not yet written"},
      {"sink.commit_outcome_lost",
       "SQL and Redis destinations: the COMMIT (EXEC) is sent and the connection cut before its "
       "answer arrives; "
       "the process lives on and must learn the outcome by reading the checkpoint row back"},
  };
  return kPoints;
}

std::string_view ArmFaultsFromEnvironment() {
  std::call_once(g_once, [] {
    const char* env = std::getenv("FERRY_FAULT");
    if (env == nullptr || *env == '\0') return;
    std::string spec(env);
    auto armed = new Armed();  // lives for the whole process
    auto colon = spec.rfind(':');
    armed->name = spec.substr(0, colon);
    if (colon != std::string::npos) {
      char* end = nullptr;
      armed->nth = std::strtol(spec.c_str() + colon + 1, &end, 10);
      if (end == nullptr || *end != '\0' || armed->nth < 1) {
        g_error = "FERRY_FAULT='" + spec + "': the hit count after ':' must be a positive integer";
        delete armed;
        return;
      }
    }
    bool known = false;
    for (const auto& p : AllFaultPoints()) known |= (p.name == armed->name);
    if (!known) {
      g_error = "FERRY_FAULT names unknown fault point '" + armed->name +
                "'; `ferry faults` lists the known points";
      delete armed;
      return;
    }
    g_armed = armed;
    g_any.store(true, std::memory_order_release);
  });
  return g_error;
}

namespace {

bool Hit(std::string_view name) {
  if (!g_any.load(std::memory_order_acquire)) [[likely]]
    return false;
  if (g_armed->name != name) return false;
  return g_armed->hits.fetch_add(1) + 1 == g_armed->nth;
}

}  // namespace

bool FaultInjected(std::string_view name) {
  if (!Hit(name)) return false;
  std::fprintf(stderr, "ferry: fault point %s reached: injecting the failure\n",
               g_armed->name.c_str());
  std::fflush(stderr);
  return true;
}

void FaultPoint(std::string_view name) {
  if (!Hit(name)) return;
  long hit = g_armed->nth;
  std::fprintf(stderr, "ferry: fault point %s reached (hit %ld): killing the process\n",
               g_armed->name.c_str(), hit);
  std::fflush(stderr);
  ::kill(::getpid(), SIGKILL);
  ::_exit(137);
}

}  // namespace ferry
