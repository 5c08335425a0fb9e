// ferry's Parquet writer on the benchmark table (see docs/benchmarks.md,
// bench/parquet_vs_duckdb.sh).
//
// Usage: parquet_write <rows> <out.parquet> [zstd|snappy|none] [batch_rows=65536] [dict|plain]
//   dict (default): WriterOptions defaults, dictionary encoding on; plain:
//   WriterOptions::dictionary off.
//
// Writes `rows` rows of the 7-column benchmark table, the same values bench/duckdb_write.mjs
// generates in SQL (row i = 1..rows; h = i * 2654435761 mod 2^32):
//   id         long, required      i
//   qty        int                 (i * 37) % 100 + 1
//   status     string              one of 5 words, by (h >> 7) % 5
//   amount     decimal(12,2)       h % 10000000 cents
//   created_at timestamptz         1704067200 + i * 7 seconds
//   note       string              "order %08d ref %08x cust %06d" (i, h, h % 999983): 39 chars
//   flag       boolean             (h >> 3) & 1
// Each batch is generated into a reused Batch (Clear() keeps its buffers), then handed to
// Writer::Write. Generation and writing are timed separately, so "write" is the writer's own cost
// (encoding, statistics, compression, file output) and "total" adds the row generation.
// Prints one JSON object on stdout.
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "ferry/format/parquet/writer.h"

using namespace ferry;
using Clock = std::chrono::steady_clock;

namespace {

const char* const kStatus[5] = {"pending", "paid", "shipped", "delivered", "cancelled"};

// Peak resident set size of this process, from /proc/self/status (kB).
long PeakRssKb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

void Generate(Batch& batch, int64_t first, int64_t count) {
  char note[64];
  for (int64_t i = first; i < first + count; ++i) {
    const int64_t h = (i * 2654435761LL) % 4294967296LL;
    batch.column(0).AppendInt64(i);
    batch.column(1).AppendInt32(static_cast<int32_t>((i * 37) % 100 + 1));
    batch.column(2).AppendBytes(kStatus[(h >> 7) % 5]);
    batch.column(3).AppendDecimal(static_cast<int128_t>(h % 10000000));
    batch.column(4).AppendInt64((1704067200LL + i * 7) * 1000000LL);
    int n =
        std::snprintf(note, sizeof note, "order %08" PRId64 " ref %08" PRIx64 " cust %06" PRId64, i,
                      h, h % 999983);
    batch.column(5).AppendBytes(std::string_view(note, static_cast<size_t>(n)));
    batch.column(6).AppendBool(((h >> 3) & 1) != 0);
  }
}

int Fail(const Status& s) {
  std::fprintf(stderr, "parquet_write: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(
        stderr,
        "usage: parquet_write <rows> <out.parquet> [zstd|snappy|none] [batch_rows] [dict|plain]\n");
    return 2;
  }
  const int64_t rows = std::strtoll(argv[1], nullptr, 10);
  const std::string path = argv[2];
  const std::string codec = argc > 3 ? argv[3] : "zstd";
  const int64_t batch_rows = argc > 4 ? std::strtoll(argv[4], nullptr, 10) : 65536;
  const std::string encoding = argc > 5 ? argv[5] : "dict";
  if (encoding != "dict" && encoding != "plain") {
    std::fprintf(stderr, "parquet_write: encoding must be dict or plain, not %s\n",
                 encoding.c_str());
    return 2;
  }

  auto schema = std::make_shared<Schema>();
  schema->fields = {{1, "id", DataType::Int64(), true, ""},
                    {2, "qty", DataType::Int32(), false, ""},
                    {3, "status", DataType::String(), false, ""},
                    {4, "amount", DataType::Decimal(12, 2), false, ""},
                    {5, "created_at", DataType::TimestampTz(), false, ""},
                    {6, "note", DataType::String(), false, ""},
                    {7, "flag", DataType::Boolean(), false, ""}};
  schema->identifier_field_ids = {1};

  auto compression = parquet::ParseCompression(codec);
  if (!compression.ok()) return Fail(compression.status());
  unlink(path.c_str());
  auto out = LocalOutputStream::Create(path);
  if (!out.ok()) return Fail(out.status());
  parquet::WriterOptions opts;  // defaults, as ferry sync uses them: 128 MB row groups, 1 MB pages
  opts.compression = *compression;
  opts.dictionary = encoding == "dict";

  double gen_s = 0, write_s = 0;
  uint64_t max_buffered = 0;
  const auto t0 = Clock::now();
  auto w = parquet::Writer::Open(std::move(*out), schema, opts);
  if (!w.ok()) return Fail(w.status());
  write_s += std::chrono::duration<double>(Clock::now() - t0).count();
  Batch batch(schema);
  for (int64_t first = 1; first <= rows; first += batch_rows) {
    const int64_t n = std::min(batch_rows, rows - first + 1);
    auto g0 = Clock::now();
    batch.Clear();
    Generate(batch, first, n);
    auto g1 = Clock::now();
    Status st = (*w)->Write(batch);
    if (!st.ok()) return Fail(st);
    auto g2 = Clock::now();
    gen_s += std::chrono::duration<double>(g1 - g0).count();
    write_s += std::chrono::duration<double>(g2 - g1).count();
    max_buffered = std::max(max_buffered, (*w)->BufferedMemoryBytes());
  }
  auto c0 = Clock::now();
  auto m = (*w)->Close();
  if (!m.ok()) return Fail(m.status());
  write_s += std::chrono::duration<double>(Clock::now() - c0).count();

  std::printf(
      "{\"rows\": %" PRId64 ", \"codec\": \"%s\", \"encoding\": \"%s\", \"batch_rows\": %" PRId64
      ", \"generate_s\": %.4f, \"write_s\": %.4f, \"total_s\": %.4f, \"file_bytes\": %" PRIu64
      ", \"row_groups\": %zu, \"max_writer_buffers_bytes\": %" PRIu64 ", \"peak_rss_kb\": %ld}\n",
      rows, codec.c_str(), encoding.c_str(), batch_rows, gen_s, write_s, gen_s + write_s,
      m->file_size_bytes, m->split_offsets.size(), max_buffered, PeakRssKb());
  return 0;
}
