// A test writer: makes many small commits to one Iceberg table through ferry's commit path (real
// Parquet files, manifests, the catalog's compare-and-swap, a marker per writer), so that several
// of them run as processes at once can show that concurrent commits all land, each exactly once.
//
//   ferry_commit_writer --catalog URI --warehouse DIR --namespace NS --table NAME --writer NAME
//                       --commits N --rows R --id-base B [--start-at UNIX_MS]
//
// Commit i (1..N) adds one data file of R rows: id = B + (i-1)*R + j, writer = NAME, commit = i,
// with the table property ferry.marker.<NAME> = i (a commit whose marker shows it landed is not
// made again). Prints one JSON document: the files committed, the attempts, conflicts and unknown
// outcomes seen. --start-at: the table is opened first, then the first commit waits for that
// moment, so that writers started one after the other commit at the same time.
// Exit code 0 when every commit landed, 1 otherwise.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "ferry/base/log.h"
#include "ferry/format/parquet/writer.h"
#include "ferry/lake/parquet_file.h"
#include "ferry/lake/table.h"

namespace {

using ferry::Result;
using ferry::Status;

struct Args {
  std::string catalog, warehouse, ns, table, writer;
  int64_t commits = 0, rows = 0, id_base = 0;
  int64_t start_at_ms = 0;
};

Result<Args> ParseArgs(int argc, char** argv) {
  Args a;
  std::map<std::string, std::string> kv;
  for (int i = 1; i + 1 < argc; i += 2) kv[argv[i]] = argv[i + 1];
  auto need = [&](const char* k) -> Result<std::string> {
    auto it = kv.find(k);
    if (it == kv.end()) return Status::InvalidArgument(std::string("missing ") + k);
    return it->second;
  };
  FERRY_ASSIGN_OR_RETURN(a.catalog, need("--catalog"));
  FERRY_ASSIGN_OR_RETURN(a.warehouse, need("--warehouse"));
  FERRY_ASSIGN_OR_RETURN(a.ns, need("--namespace"));
  FERRY_ASSIGN_OR_RETURN(a.table, need("--table"));
  FERRY_ASSIGN_OR_RETURN(a.writer, need("--writer"));
  FERRY_ASSIGN_OR_RETURN(std::string commits, need("--commits"));
  FERRY_ASSIGN_OR_RETURN(std::string rows, need("--rows"));
  FERRY_ASSIGN_OR_RETURN(std::string base, need("--id-base"));
  a.commits = std::strtoll(commits.c_str(), nullptr, 10);
  a.rows = std::strtoll(rows.c_str(), nullptr, 10);
  a.id_base = std::strtoll(base.c_str(), nullptr, 10);
  if (kv.count("--start-at")) a.start_at_ms = std::strtoll(kv["--start-at"].c_str(), nullptr, 10);
  if (a.commits < 1 || a.rows < 1) return Status::InvalidArgument("--commits and --rows >= 1");
  return a;
}

Result<nlohmann::json> Run(const Args& a) {
  FERRY_ASSIGN_OR_RETURN(
      auto catalog, ferry::lake::OpenSqlCatalog(a.catalog, "ferry", ferry::lake::LocalFileIO()));
  ferry::Schema schema;
  schema.fields = {{1, "id", ferry::DataType::Int64(), true, ""},
                   {2, "writer", ferry::DataType::String(), true, ""},
                   {3, "commit", ferry::DataType::Int32(), true, ""}};
  schema.identifier_field_ids = {1};
  const std::map<std::string, std::string> props = {
      {"write.format.default", "parquet"},
      {"write.metadata.delete-after-commit.enabled", "true"},
      {"write.metadata.previous-versions-max", "20"}};
  ferry::lake::TableIdent ident{a.ns, a.table};
  const std::string location = ferry::lake::ToUri(a.warehouse + "/" + a.ns + "/" + a.table);
  FERRY_ASSIGN_OR_RETURN(auto io, ferry::lake::OpenFileIO(location));
  FERRY_ASSIGN_OR_RETURN(auto table, ferry::lake::Table::LoadOrCreate(catalog.get(), io, ident,
                                                                      location, schema, props));
  FERRY_ASSIGN_OR_RETURN(ferry::Schema with_ids, table->AssignFieldIds(schema, false));
  auto writer_schema = std::make_shared<const ferry::Schema>(with_ids);
  // Two writers commit back to back all the time here, far more often than pipelines do: allow
  // more attempts than the default so that the test measures correctness, not the policy.
  table->set_retry_policy(ferry::lake::CommitRetryPolicy{100, 10, 500});

  std::this_thread::sleep_until(
      std::chrono::system_clock::time_point(std::chrono::milliseconds(a.start_at_ms)));

  const std::string marker_key = "ferry.marker." + a.writer;
  nlohmann::json files = nlohmann::json::array();
  int64_t conflicts = 0, unknown = 0, landed_before = 0;
  int max_attempts = 0;
  for (int64_t i = 1; i <= a.commits; ++i) {
    std::string uri = table->NewDataFileUri(a.writer);
    FERRY_ASSIGN_OR_RETURN(auto out, table->io().NewFile(uri));
    FERRY_ASSIGN_OR_RETURN(auto w, ferry::parquet::Writer::Open(std::move(out), writer_schema));
    ferry::Batch batch(writer_schema);
    for (int64_t j = 0; j < a.rows; ++j) {
      batch.column(0).AppendInt64(a.id_base + (i - 1) * a.rows + j);
      batch.column(1).AppendBytes(a.writer);
      batch.column(2).AppendInt32(static_cast<int32_t>(i));
    }
    FERRY_RETURN_IF_ERROR(w->Write(batch));
    FERRY_ASSIGN_OR_RETURN(auto metrics, w->Close());

    ferry::lake::AppendRequest req;
    req.schema = writer_schema.get();
    req.data_files = {ferry::lake::DataFileOf(uri, metrics)};
    req.set_properties[marker_key] = std::to_string(i);
    req.summary["ferry.writer"] = a.writer;
    req.already_landed = [&](const ferry::lake::TableMetadata& m) {
      auto v = m.Property(marker_key);
      return v && std::strtoll(v->c_str(), nullptr, 10) >= i;
    };
    auto r = table->Append(req);
    if (!r.ok()) return r.status().WithContext("commit " + std::to_string(i) + " of " + a.writer);
    conflicts += r->lost_races;
    unknown += r->unknown_outcomes;
    landed_before += r->already_landed ? 1 : 0;
    max_attempts = std::max(max_attempts, r->attempts);
    files.push_back(uri);
  }
  return nlohmann::json{{"writer", a.writer},
                        {"commits", a.commits},
                        {"files", files},
                        {"conflicts", conflicts},
                        {"unknown_outcomes", unknown},
                        {"already_landed", landed_before},
                        {"max_attempts", max_attempts}};
}

}  // namespace

int main(int argc, char** argv) {
  auto args = ParseArgs(argc, argv);
  if (!args.ok()) {
    std::cerr
        << "usage: ferry_commit_writer --catalog URI --warehouse DIR --namespace NS "
           "--table NAME --writer NAME --commits N --rows R --id-base B [--start-at UNIX_MS] ("
        << args.status().message() << ")\n";
    return 2;
  }
  auto result = Run(*args);
  if (!result.ok()) {
    std::cerr << "ferry_commit_writer: " << result.status().ToString() << "\n";
    return 1;
  }
  std::cout << result->dump() << "\n";
  return 0;
}
