// libFuzzer target: arbitrary bytes as a replication session's messages. The input is split at
// 0xFF 0x00 pairs into CopyData messages; each is parsed as a frame, its payload as a pgoutput
// message (inside a stream block when the ChangeSet is in one, so streamed transactions with
// their subtransactions, aborts and commits are reached too), and applied to a ChangeSet following
// two tables; at the end the held changes are
// decoded into batches. Anything may fail with a Status; nothing may crash or over-read.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ferry/source/postgres/pg_changes.h"
#include "ferry/source/postgres/pgoutput.h"

using namespace ferry::source::pg;  // NOLINT(build/namespaces): a fuzz driver

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto schema = std::make_shared<ferry::Schema>();
  schema->fields.push_back(ferry::Field{1, "id", ferry::DataType::Int64(), true, ""});
  schema->fields.push_back(ferry::Field{2, "v", ferry::DataType::String(), false, ""});
  schema->fields.push_back(ferry::Field{3, "n", ferry::DataType::Decimal(10, 2), false, ""});
  schema->identifier_field_ids = {1};
  std::vector<ChangeTable> tables(2);
  for (int i = 0; i < 2; ++i) {
    ChangeTable& t = tables[static_cast<size_t>(i)];
    t.stream = t.relname = i == 0 ? "a" : "b";
    t.nspname = "public";
    t.columns = {"id", "v", "n"};
    t.wires = {PgWire::kInt8, PgWire::kText, PgWire::kNumericDecimal};
    t.type_oids = {20, 25, 1700};
    t.key = {0};
    t.schema = schema;
    t.position = i == 0 ? 0 : 0x100;
  }
  ChangeSet cs(std::move(tables));
  std::string_view in(reinterpret_cast<const char*>(data), size);
  ReplicationFrame frame;
  PgOutputMessage m;
  while (!in.empty()) {
    size_t cut = in.find(std::string_view("\xff\x00", 2));
    std::string_view one = in.substr(0, cut);
    in = cut == std::string_view::npos ? std::string_view() : in.substr(cut + 2);
    if (!ParseReplicationFrame(one, &frame).ok() || frame.kind != 'w') continue;
    if (!ParsePgOutput(frame.payload, &m, cs.in_stream()).ok()) continue;
    ChangeEvent e;
    std::string detail;
    if (!cs.Apply(m, &e, &detail).ok()) break;
    if (e != ChangeEvent::kNone) cs.DropTransaction();
  }
  for (const auto& missing : cs.Unresolved()) cs.Resolve(missing, std::nullopt);
  (void)cs.TakeBatches(3, [](size_t, ferry::Batch&, bool) { return true; });
  return 0;
}
