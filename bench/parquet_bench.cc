// Throughput check: writes N rows of (int64, double, short string) to a Parquet file.
// Usage: parquet_bench [rows=5000000] [zstd|snappy|none] [path=/tmp/ferry_bench.parquet]
// Batches are built once and reused, so the figure is the writer's own cost (encode, stats,
// compression, I/O).
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "ferry/format/parquet/writer.h"

using namespace ferry;

int main(int argc, char** argv) {
  const size_t rows = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 5000000;
  const std::string codec = argc > 2 ? argv[2] : "zstd";
  const std::string path = argc > 3 ? argv[3] : "/tmp/ferry_bench.parquet";
  auto schema = std::make_shared<Schema>();
  schema->fields = {{1, "id", DataType::Int64(), true, ""},
                    {2, "amount", DataType::Float64(), false, ""},
                    {3, "name", DataType::String(), false, ""}};
  const size_t kBatch = 65536;
  const size_t kDistinct = 16;
  std::vector<Batch> batches;
  std::mt19937_64 rng(42);
  for (size_t b = 0; b < kDistinct; ++b) {
    Batch batch(schema);
    for (size_t i = 0; i < kBatch; ++i) {
      size_t r = b * kBatch + i;
      batch.column(0).AppendInt64(static_cast<int64_t>(r));
      batch.column(1).AppendDouble(static_cast<double>(rng() % 1000000) / 100.0);
      batch.column(2).AppendBytes("user_" + std::to_string(rng() % 100000));
    }
    batches.push_back(std::move(batch));
  }
  unlink(path.c_str());
  auto out = LocalOutputStream::Create(path);
  if (!out.ok()) return std::fprintf(stderr, "%s\n", out.status().ToString().c_str()), 1;
  parquet::WriterOptions opts;
  opts.compression = *parquet::ParseCompression(codec);
  auto start = std::chrono::steady_clock::now();
  auto w = parquet::Writer::Open(std::move(*out), schema, opts);
  if (!w.ok()) return std::fprintf(stderr, "%s\n", w.status().ToString().c_str()), 1;
  size_t written = 0;
  for (size_t b = 0; written < rows; ++b) {
    const Batch& batch = batches[b % kDistinct];
    if (rows - written < kBatch) {
      Batch tail(schema);  // rare: the last partial batch
      for (size_t i = 0; i < rows - written; ++i) {
        tail.column(0).AppendInt64(batch.column(0).values<int64_t>()[i]);
        tail.column(1).AppendDouble(batch.column(1).values<double>()[i]);
        tail.column(2).AppendBytes(batch.column(2).GetBytes(i));
      }
      if (!(*w)->Write(tail).ok()) return 1;
      written = rows;
      break;
    }
    Status st = (*w)->Write(batch);
    if (!st.ok()) return std::fprintf(stderr, "%s\n", st.ToString().c_str()), 1;
    written += kBatch;
  }
  auto m = (*w)->Close();
  if (!m.ok()) return std::fprintf(stderr, "%s\n", m.status().ToString().c_str()), 1;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "%zu rows, %s: %.3f s, %.2f M rows/s, file %.1f MB, %zu row groups, peak buffers %.1f MB\n",
      rows, codec.c_str(), secs, rows / secs / 1e6, m->file_size_bytes / 1e6,
      m->split_offsets.size(), (*w)->BufferedMemoryBytes() / 1e6);
  return 0;
}
