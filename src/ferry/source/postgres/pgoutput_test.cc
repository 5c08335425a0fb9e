#include "ferry/source/postgres/pgoutput.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "ferry/source/postgres/pg_changes.h"

namespace ferry::source::pg {
namespace {

// ---- building pgoutput messages by hand ----
std::string B16(uint16_t v) { return std::string{char(v >> 8), char(v & 0xFF)}; }
std::string B32(uint32_t v) { return B16(uint16_t(v >> 16)) + B16(uint16_t(v & 0xFFFF)); }
std::string B64(uint64_t v) { return B32(uint32_t(v >> 32)) + B32(uint32_t(v & 0xFFFFFFFF)); }
std::string Str(const std::string& s) { return s + std::string(1, '\0'); }

// `at`: the commit time, in microseconds since 2000-01-01 (pgoutput's epoch).
std::string Begin(uint64_t final_lsn, uint32_t xid, uint64_t at = 0) {
  return "B" + B64(final_lsn) + B64(at) + B32(xid);
}
std::string Commit(uint64_t lsn, uint64_t end) {
  return "C" + std::string(1, '\0') + B64(lsn) + B64(end) + B64(0);
}
std::string Relation(uint32_t relid, const std::string& ns, const std::string& name,
                     const std::vector<std::tuple<bool, std::string, uint32_t>>& cols) {
  std::string m = "R" + B32(relid) + Str(ns) + Str(name) + "d" + B16(uint16_t(cols.size()));
  for (const auto& [key, n, oid] : cols)
    m += std::string(1, key ? 1 : 0) + Str(n) + B32(oid) + B32(0xFFFFFFFF);
  return m;
}
// A tuple: each entry "n", "u" or a binary value.
struct V {
  char kind;
  std::string bytes;
};
std::string Tuple(const std::vector<V>& vals) {
  std::string t = B16(uint16_t(vals.size()));
  for (const auto& v : vals) {
    t += v.kind;
    if (v.kind == 'b' || v.kind == 't') t += B32(uint32_t(v.bytes.size())) + v.bytes;
  }
  return t;
}
V Int4(int32_t v) { return {'b', B32(uint32_t(v))}; }
V Text(const std::string& s) { return {'b', s}; }
V Null() { return {'n', ""}; }
V Unchanged() { return {'u', ""}; }
std::string Insert(uint32_t relid, const std::vector<V>& row) {
  return "I" + B32(relid) + "N" + Tuple(row);
}
std::string Update(uint32_t relid, char old_kind, const std::vector<V>& old_row,
                   const std::vector<V>& row) {
  std::string m = "U" + B32(relid);
  if (old_kind) m += std::string(1, old_kind) + Tuple(old_row);
  return m + "N" + Tuple(row);
}
std::string Delete(uint32_t relid, char kind, const std::vector<V>& old_row) {
  return "D" + B32(relid) + std::string(1, kind) + Tuple(old_row);
}
// Streamed transactions: the block markers, and a message of (sub)transaction `xid` inside one.
std::string StreamStart(uint32_t xid) { return "S" + B32(xid) + std::string(1, 1); }
std::string StreamStop() { return "E"; }
std::string StreamCommit(uint32_t xid, uint64_t lsn, uint64_t end, uint64_t at = 0) {
  return "c" + B32(xid) + std::string(1, '\0') + B64(lsn) + B64(end) + B64(at);
}
std::string StreamAbort(uint32_t xid, uint32_t subxid) { return "A" + B32(xid) + B32(subxid); }
std::string By(uint32_t xid, const std::string& msg) {
  return msg.substr(0, 1) + B32(xid) + msg.substr(1);
}

TEST(PgOutputTest, ParsesEveryMessageItUses) {
  PgOutputMessage m;
  ASSERT_TRUE(ParsePgOutput(Begin(0x10, 7), &m).ok());
  EXPECT_EQ(m.type, 'B');
  EXPECT_EQ(m.lsn, 0x10u);
  EXPECT_EQ(m.xid, 7u);
  ASSERT_TRUE(ParsePgOutput(Commit(0x20, 0x28), &m).ok());
  EXPECT_EQ(m.end_lsn, 0x28u);
  ASSERT_TRUE(
      ParsePgOutput(Relation(5, "public", "t", {{true, "id", 23}, {false, "v", 25}}), &m).ok());
  ASSERT_EQ(m.columns.size(), 2u);
  EXPECT_TRUE(m.columns[0].key);
  EXPECT_EQ(m.columns[1].name, "v");
  EXPECT_EQ(m.columns[1].type_oid, 25u);
  ASSERT_TRUE(ParsePgOutput(Update(5, 'K', {Int4(1), Null()}, {Int4(2), Unchanged()}), &m).ok());
  EXPECT_EQ(m.old_kind, 'K');
  ASSERT_EQ(m.new_tuple.size(), 2u);
  EXPECT_EQ(m.new_tuple[1].kind, 'u');
  ASSERT_TRUE(ParsePgOutput("T" + B32(2) + std::string(1, 1) + B32(5) + B32(6), &m).ok());
  EXPECT_EQ(m.truncated, (std::vector<uint32_t>{5, 6}));
}

TEST(PgOutputTest, TruncatedOrTrailingBytesAreCorruptionNeverACrash) {
  std::string msgs[] = {Begin(1, 2), Commit(1, 2), Relation(5, "s", "t", {{true, "id", 23}}),
                        Insert(5, {Int4(1), Text("abc")}), Delete(5, 'O', {Int4(1), Null()})};
  PgOutputMessage m;
  for (const auto& full : msgs) {
    ASSERT_TRUE(ParsePgOutput(full, &m).ok()) << full[0];
    for (size_t n = 1; n < full.size(); ++n) {
      Status s = ParsePgOutput(full.substr(0, n), &m);
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << full[0] << " cut at " << n;
    }
    EXPECT_EQ(ParsePgOutput(full + "x", &m).code(), StatusCode::kCorruption);
  }
  // Streamed-transaction messages, and the xid that messages inside a stream block carry.
  std::string streamed[] = {StreamStart(9), StreamCommit(9, 0x30, 0x38), StreamAbort(9, 11)};
  for (const auto& full : streamed) {
    ASSERT_TRUE(ParsePgOutput(full, &m).ok()) << full[0];
    for (size_t n = 1; n < full.size(); ++n) {
      EXPECT_EQ(ParsePgOutput(full.substr(0, n), &m).code(), StatusCode::kCorruption)
          << full[0] << " cut at " << n;
    }
  }
  std::string in_block = By(11, Insert(5, {Int4(1), Text("abc")}));
  ASSERT_TRUE(ParsePgOutput(in_block, &m, /*in_stream=*/true).ok());
  EXPECT_EQ(m.xid, 11u);
  EXPECT_EQ(m.relid, 5u);
  EXPECT_EQ(ParsePgOutput(in_block, &m).code(), StatusCode::kCorruption);
  for (size_t n = 1; n < in_block.size(); ++n) {
    EXPECT_EQ(ParsePgOutput(in_block.substr(0, n), &m, true).code(), StatusCode::kCorruption);
  }
}

TEST(PgOutputTest, ParsesStreamedTransactionMessages) {
  PgOutputMessage m;
  ASSERT_TRUE(ParsePgOutput(StreamCommit(9, 0x30, 0x38), &m).ok());
  EXPECT_EQ(m.type, 'c');
  EXPECT_EQ(m.xid, 9u);
  EXPECT_EQ(m.lsn, 0x30u);
  EXPECT_EQ(m.end_lsn, 0x38u);
  ASSERT_TRUE(ParsePgOutput(StreamAbort(9, 11), &m).ok());
  EXPECT_EQ(m.subxid, 11u);
  // Protocol 4 with parallel streaming adds the abort's LSN and time.
  ASSERT_TRUE(ParsePgOutput(StreamAbort(9, 9) + B64(0x40) + B64(0), &m).ok());
  EXPECT_EQ(m.subxid, 9u);
  ASSERT_TRUE(ParsePgOutput(StreamStop(), &m).ok());
  EXPECT_EQ(m.type, 'E');
}

TEST(PgOutputTest, LsnTextRoundTrips) {
  EXPECT_EQ(FormatLsn(0x16B374D848ull), "16/B374D848");
  EXPECT_EQ(*ParseLsn("16/B374D848"), 0x16B374D848ull);
  EXPECT_EQ(*ParseLsn("00000016/0374D848"), 0x160374D848ull);
  EXPECT_FALSE(ParseLsn("16-B374").ok());
  EXPECT_FALSE(ParseLsn("/1").ok());
}

TEST(PgOutputTest, FramesAndStatusUpdates) {
  ReplicationFrame f;
  std::string w = "w" + B64(0x100) + B64(0x200) + B64(0) + Begin(1, 2);
  ASSERT_TRUE(ParseReplicationFrame(w, &f).ok());
  EXPECT_EQ(f.kind, 'w');
  EXPECT_EQ(f.wal_start, 0x100u);
  EXPECT_EQ(f.payload, Begin(1, 2));
  ASSERT_TRUE(ParseReplicationFrame("k" + B64(0x300) + B64(0) + std::string(1, 1), &f).ok());
  EXPECT_EQ(f.wal_end, 0x300u);
  EXPECT_TRUE(f.reply_requested);
  EXPECT_FALSE(ParseReplicationFrame("k" + B64(1), &f).ok());
  std::string r = StandbyStatusUpdate(0x10, 0x20, true);
  ASSERT_EQ(r.size(), 34u);
  EXPECT_EQ(r[0], 'r');
  EXPECT_EQ(r.substr(9, 8), B64(0x20));   // flushed
  EXPECT_EQ(r.substr(17, 8), B64(0x20));  // applied
  EXPECT_EQ(r[33], 1);
}

// ---- ChangeSet: the last change per key, transaction boundaries, TOAST ----

constexpr uint32_t kRel = 16384;

ChangeTable Table(Lsn position = 0) {
  ChangeTable t;
  t.stream = "t";
  t.nspname = "public";
  t.relname = "t";
  t.columns = {"id", "v"};
  t.wires = {PgWire::kInt4, PgWire::kText};
  t.type_oids = {23, 25};
  t.key = {0};
  auto s = std::make_shared<Schema>();
  s->fields.push_back(Field{1, "id", DataType::Int32(), true, ""});
  s->fields.push_back(Field{2, "v", DataType::String(), false, ""});
  s->identifier_field_ids = {1};
  t.schema = s;
  t.position = position;
  return t;
}

struct Seen {
  std::map<int32_t, std::optional<std::string>> upserts;
  std::set<int32_t> deletes;
  std::map<int32_t, std::string> deleted_values;  // deleted rows whose old values came
  // Per key, its change's origin: "<op> <commit time> <position>".
  std::map<int32_t, std::string> origins;
};

Status Feed(ChangeSet* cs, const std::vector<std::string>& msgs, ChangeEvent* last = nullptr) {
  PgOutputMessage m;
  for (const auto& raw : msgs) {
    FERRY_RETURN_IF_ERROR(ParsePgOutput(raw, &m, cs->in_stream()));
    ChangeEvent e;
    std::string detail;
    FERRY_RETURN_IF_ERROR(cs->Apply(m, &e, &detail));
    if (last) *last = e;
    if (e != ChangeEvent::kNone) return Status::OK();
  }
  return Status::OK();
}

Seen Take(ChangeSet* cs, const ChangeSet::Resolver& resolve = nullptr) {
  Seen seen;
  Status s = cs->TakeBatches(
      2,
      [&](size_t, Batch& b, bool deletes) {
        EXPECT_EQ(b.origins().size(), b.num_rows());
        for (size_t r = 0; r < b.num_rows(); ++r) {
          int32_t id = b.column(0).values<int32_t>()[r];
          if (r < b.origins().size()) {
            const RowOrigin& o = b.origins()[r];
            seen.origins[id] = std::to_string(static_cast<int>(o.op)) + " " +
                               std::to_string(o.commit_us) + " " + Position::Of(o).ToString();
          }
          if (deletes) {
            seen.deletes.insert(id);
            if (b.column(1).IsValid(r))
              seen.deleted_values[id] = std::string(b.column(1).GetBytes(r));
          } else {
            seen.upserts[id] =
                b.column(1).IsValid(r)
                    ? std::optional<std::string>(std::string(b.column(1).GetBytes(r)))
                    : std::nullopt;
          }
        }
        return true;
      },
      resolve);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return seen;
}

TEST(ChangeSetTest, TheLastChangeOfAKeyWinsAndKeyChangesDeleteTheOldKey) {
  ChangeSet cs({Table()});
  ASSERT_TRUE(
      Feed(&cs, {Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}}),
                 Begin(0x100, 1), Insert(kRel, {Int4(1), Text("a")}),
                 Update(kRel, 0, {}, {Int4(1), Text("b")}), Insert(kRel, {Int4(2), Text("x")}),
                 Delete(kRel, 'K', {Int4(2), Null()}), Insert(kRel, {Int4(3), Text("c")}),
                 Update(kRel, 'K', {Int4(3), Null()}, {Int4(4), Text("d")}), Commit(0x100, 0x108)})
          .ok());
  EXPECT_EQ(cs.last_commit_end(), 0x108u);
  EXPECT_EQ(cs.pending_changes(), 4u);
  Seen s = Take(&cs);
  EXPECT_EQ(s.upserts, (std::map<int32_t, std::optional<std::string>>{{1, "b"}, {4, "d"}}));
  EXPECT_EQ(s.deletes, (std::set<int32_t>{2, 3}));
  EXPECT_EQ(cs.pending_changes(), 0u);
}

TEST(ChangeSetTest, TransactionsAlreadyInTheTableAreSkipped) {
  ChangeSet cs({Table(/*position=*/0x200)});
  ASSERT_TRUE(
      Feed(&cs, {Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}}),
                 Begin(0x1F0, 1), Insert(kRel, {Int4(1), Text("old")}), Commit(0x1F0, 0x1F8),
                 Begin(0x200, 2), Insert(kRel, {Int4(2), Text("new")}), Commit(0x200, 0x208)})
          .ok());
  Seen s = Take(&cs);
  EXPECT_EQ(s.upserts, (std::map<int32_t, std::optional<std::string>>{{2, "new"}}));
}

TEST(ChangeSetTest, UnchangedToastValuesComeFromEarlierChangesOrAreResolved) {
  ChangeSet cs({Table()});
  ASSERT_TRUE(Feed(&cs, {Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}}),
                         Begin(0x100, 1), Insert(kRel, {Int4(1), Text("big")}),
                         Update(kRel, 0, {}, {Int4(1), Unchanged()}),
                         Update(kRel, 0, {}, {Int4(2), Unchanged()}),
                         Update(kRel, 0, {}, {Int4(3), Unchanged()}), Commit(0x100, 0x108)})
                  .ok());
  std::vector<std::string> asked;
  Seen s = Take(&cs, [&](size_t, const std::vector<std::vector<std::string>>& keys,
                         std::vector<ChangeSet::Row>* rows) {
    rows->clear();
    for (const auto& k : keys) {
      asked.push_back(k[0]);
      if (k[0] == B32(2)) {
        rows->push_back(std::vector<std::optional<std::string>>{B32(2), std::string("looked up")});
      } else {
        rows->push_back(std::nullopt);  // the row is gone: the change becomes a delete
      }
    }
    return Status::OK();
  });
  std::sort(asked.begin(), asked.end());
  EXPECT_EQ(asked, (std::vector<std::string>{B32(2), B32(3)}));  // key 1 took the inserted value
  EXPECT_EQ(s.upserts,
            (std::map<int32_t, std::optional<std::string>>{{1, "big"}, {2, "looked up"}}));
  EXPECT_EQ(s.deletes, (std::set<int32_t>{3}));
}

TEST(ChangeSetTest, FullIdentityOldImageFillsUnchangedValues) {
  ChangeSet cs({Table()});
  ASSERT_TRUE(Feed(&cs, {Relation(kRel, "public", "t", {{true, "id", 23}, {true, "v", 25}}),
                         Begin(0x100, 1),
                         Update(kRel, 'O', {Int4(5), Text("kept")}, {Int4(5), Unchanged()}),
                         Commit(0x100, 0x108)})
                  .ok());
  // Nothing is looked up: a Take without a resolver would fail if anything were missing.
  EXPECT_EQ(Take(&cs).upserts, (std::map<int32_t, std::optional<std::string>>{{5, "kept"}}));
}

TEST(ChangeSetTest, DeletesCarryTheOldRowWithFullIdentityAndTheKeyOtherwise) {
  ChangeSet cs({Table()});
  ASSERT_TRUE(Feed(&cs, {Relation(kRel, "public", "t", {{true, "id", 23}, {true, "v", 25}}),
                         Begin(0x100, 1), Delete(kRel, 'O', {Int4(1), Text("last")}),
                         Delete(kRel, 'K', {Int4(2), Null()}),
                         Update(kRel, 'O', {Int4(3), Text("moved")}, {Int4(30), Text("moved")}),
                         Commit(0x100, 0x108)})
                  .ok());
  Seen s = Take(&cs);
  EXPECT_EQ(s.deletes, (std::set<int32_t>{1, 2, 3}));
  // What deletes: soft keeps: the row as it was, where the log has it.
  EXPECT_EQ(s.deleted_values, (std::map<int32_t, std::string>{{1, "last"}, {3, "moved"}}));
  EXPECT_EQ(s.upserts, (std::map<int32_t, std::optional<std::string>>{{30, "moved"}}));
}

// Each change says what it was and where its transaction committed: the commit's time (from the
// Begin, or a streamed transaction's Stream Commit) and LSN.
TEST(ChangeSetTest, EveryChangeCarriesItsKindCommitTimeAndPosition) {
  ChangeSet cs({Table()});
  const uint64_t t2000 = 946684800000000;  // 2000-01-01 in microseconds since 1970
  const std::string rel = Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}});
  ASSERT_TRUE(Feed(&cs, {rel, Begin(0x100, 1, 5), Insert(kRel, {Int4(1), Text("a")}),
                         Insert(kRel, {Int4(2), Text("b")}), Commit(0x100, 0x108), StreamStart(9),
                         By(9, rel), By(9, Insert(kRel, {Int4(4), Text("s")})), StreamStop(),
                         Begin(0x200, 2, 7), Update(kRel, 0, {}, {Int4(1), Text("a2")}),
                         Delete(kRel, 'K', {Int4(2), Null()}), Insert(kRel, {Int4(3), Text("c")}),
                         Commit(0x200, 0x208), StreamCommit(9, 0x300, 0x308, 11)})
                  .ok());
  Seen s = Take(&cs);
  EXPECT_EQ(s.origins, (std::map<int32_t, std::string>{
                           {1, "2 " + std::to_string(t2000 + 7) + " 0/200"},
                           {2, "3 " + std::to_string(t2000 + 7) + " 0/200"},
                           {3, "1 " + std::to_string(t2000 + 7) + " 0/200"},
                           {4, "1 " + std::to_string(t2000 + 11) + " 0/300"},
                       }));
}

TEST(ChangeSetTest, SchemaChangesAndTruncatesStopBeforeTheirTransaction) {
  ChangeSet cs({Table()});
  ChangeEvent e = ChangeEvent::kNone;
  ASSERT_TRUE(
      Feed(&cs,
           {Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}}), Begin(0x100, 1),
            Insert(kRel, {Int4(1), Text("a")}), Commit(0x100, 0x108), Begin(0x200, 2),
            Insert(kRel, {Int4(2), Text("b")}),
            Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}, {false, "w", 23}})},
           &e)
          .ok());
  EXPECT_EQ(e, ChangeEvent::kSchemaChanged);
  cs.DropTransaction();
  EXPECT_EQ(Take(&cs).upserts, (std::map<int32_t, std::optional<std::string>>{{1, "a"}}));

  ChangeSet cs2({Table()});
  ASSERT_TRUE(Feed(&cs2,
                   {Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}}),
                    Begin(0x100, 1), "T" + B32(1) + std::string(1, 0) + B32(kRel)},
                   &e)
                  .ok());
  EXPECT_EQ(e, ChangeEvent::kTruncated);
  // A type change is a schema change too.
  ChangeSet cs3({Table()});
  ASSERT_TRUE(
      Feed(&cs3, {Relation(kRel, "public", "t", {{true, "id", 20}, {false, "v", 25}})}, &e).ok());
  EXPECT_EQ(e, ChangeEvent::kSchemaChanged);
}

TEST(ChangeSetTest, ColumnsAddedLaterReadNullAndDroppedOnesAreIgnoredWhenAllowed) {
  // The log predates a column the table has now: no event, the value is NULL.
  ChangeSet cs({Table()});
  ChangeEvent e = ChangeEvent::kNone;
  ASSERT_TRUE(Feed(&cs,
                   {Relation(kRel, "public", "t", {{true, "id", 23}}), Begin(0x100, 1),
                    Insert(kRel, {Int4(7)}), Commit(0x100, 0x108)},
                   &e)
                  .ok());
  EXPECT_EQ(e, ChangeEvent::kNone);
  EXPECT_EQ(Take(&cs).upserts, (std::map<int32_t, std::optional<std::string>>{{7, std::nullopt}}));
  // The log has a column the table no longer has: reported; once allowed, ignored.
  std::string rel =
      Relation(kRel, "public", "t", {{true, "id", 23}, {false, "gone", 23}, {false, "v", 25}});
  ASSERT_TRUE(Feed(&cs, {Begin(0x200, 2), rel}, &e).ok());
  ASSERT_EQ(e, ChangeEvent::kSchemaChanged);
  EXPECT_EQ(cs.schema_change().unknown_columns, std::vector<std::string>{"gone"});
  cs.AllowDroppedColumns(kRel, {"gone"});
  ASSERT_TRUE(
      Feed(&cs, {rel, Insert(kRel, {Int4(8), Int4(1), Text("x")}), Commit(0x200, 0x208)}, &e).ok());
  EXPECT_EQ(e, ChangeEvent::kNone);
  EXPECT_EQ(Take(&cs).upserts, (std::map<int32_t, std::optional<std::string>>{{8, "x"}}));
}

// A large transaction streamed in blocks, interleaved with a whole one: nothing of it is held
// before its commit; then its changes count in the order they were made, without those of the
// subtransaction rolled back. A streamed transaction that aborts leaves nothing.
TEST(ChangeSetTest, StreamedTransactionsLandAtTheirCommitWithoutRolledBackSubtransactions) {
  ChangeSet cs({Table()});
  const std::string rel = Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}});
  ASSERT_TRUE(
      Feed(&cs, {StreamStart(10), By(10, rel), By(10, Insert(kRel, {Int4(1), Text("a")})),
                 By(11, Insert(kRel, {Int4(2), Text("sub")})), StreamStop(), StreamStart(30),
                 By(30, Insert(kRel, {Int4(5), Text("never")})), StreamStop(), Begin(0x100, 20),
                 Insert(kRel, {Int4(3), Text("whole")}), Commit(0x100, 0x108)})
          .ok());
  EXPECT_FALSE(cs.in_transaction());
  EXPECT_EQ(cs.open_streamed(), 2u);
  EXPECT_EQ(cs.pending_changes(), 1u);  // only the whole transaction's change so far
  ASSERT_TRUE(Feed(&cs, {StreamStart(10), By(10, Update(kRel, 0, {}, {Int4(1), Text("b")})),
                         By(12, Update(kRel, 0, {}, {Int4(1), Text("rolled back")})),
                         By(10, Update(kRel, 0, {}, {Int4(4), Text("d")})), StreamStop(),
                         StreamAbort(10, 12), StreamAbort(30, 30), StreamAbort(10, 11),
                         StreamCommit(10, 0x200, 0x208)})
                  .ok());
  EXPECT_EQ(cs.last_commit_end(), 0x208u);
  EXPECT_EQ(cs.open_streamed(), 0u);
  Seen s = Take(&cs);
  EXPECT_EQ(s.upserts,
            (std::map<int32_t, std::optional<std::string>>{{1, "b"}, {3, "whole"}, {4, "d"}}));
  EXPECT_TRUE(s.deletes.empty());
}

// Across subtransactions the later change wins, and an unchanged TOASTed value takes the value
// of the key's latest change that was not rolled back.
TEST(ChangeSetTest, StreamedChangesMergeInTheOrderTheyWereMade) {
  ChangeSet cs({Table()});
  const std::string rel = Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}});
  ASSERT_TRUE(
      Feed(&cs, {StreamStart(10), By(10, rel), By(10, Insert(kRel, {Int4(1), Text("t1")})),
                 By(11, Update(kRel, 0, {}, {Int4(1), Text("s1")})),
                 By(10, Insert(kRel, {Int4(2), Text("top")})),
                 By(13, Update(kRel, 0, {}, {Int4(2), Text("s3")})),
                 By(13, Delete(kRel, 'K', {Int4(2), Null()})), StreamStop(), StreamAbort(10, 13),
                 StreamStart(10), By(10, Update(kRel, 0, {}, {Int4(1), Unchanged()})),
                 By(10, Update(kRel, 0, {}, {Int4(2), Unchanged()})), StreamStop(),
                 StreamCommit(10, 0x200, 0x208)})
          .ok());
  EXPECT_EQ(Take(&cs).upserts,
            (std::map<int32_t, std::optional<std::string>>{{1, "s1"}, {2, "top"}}));
}

// A streamed transaction already in the table is skipped at its commit; a TRUNCATE inside one
// counts only once it commits.
TEST(ChangeSetTest, StreamedTransactionsAreSkippedByPositionAndTruncatesWaitForTheCommit) {
  const std::string rel = Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}});
  const std::string truncate = "T" + B32(1) + std::string(1, 0) + B32(kRel);
  ChangeSet cs({Table(/*position=*/0x300)});
  ChangeEvent e = ChangeEvent::kNone;
  ASSERT_TRUE(Feed(&cs,
                   {StreamStart(10), By(10, rel), By(10, Insert(kRel, {Int4(1), Text("old")})),
                    StreamStop(), StreamCommit(10, 0x2F0, 0x2F8), StreamStart(11),
                    By(11, Insert(kRel, {Int4(2), Text("new")})), By(11, truncate), StreamStop(),
                    StreamAbort(11, 11)},
                   &e)
                  .ok());
  EXPECT_EQ(e, ChangeEvent::kNone);
  EXPECT_EQ(cs.pending_changes(), 0u);
  ASSERT_TRUE(Feed(&cs,
                   {StreamStart(12), By(12, Insert(kRel, {Int4(3), Text("x")})), By(12, truncate),
                    StreamStop()},
                   &e)
                  .ok());
  EXPECT_EQ(e, ChangeEvent::kNone);
  ASSERT_TRUE(Feed(&cs, {StreamCommit(12, 0x400, 0x408)}, &e).ok());
  EXPECT_EQ(e, ChangeEvent::kTruncated);
  EXPECT_EQ(cs.pending_changes(), 0u);  // the caller stops before this transaction
  // Ignoring TRUNCATE (source.truncate: ignore): reported, and the changes count.
  ChangeSet ignoring({Table()});
  ignoring.set_ignore_truncate(true);
  ASSERT_TRUE(Feed(&ignoring,
                   {StreamStart(12), By(12, rel), By(12, Insert(kRel, {Int4(3), Text("x")})),
                    By(12, truncate), StreamStop(), StreamCommit(12, 0x400, 0x408)},
                   &e)
                  .ok());
  EXPECT_EQ(e, ChangeEvent::kTruncated);
  EXPECT_EQ(Take(&ignoring).upserts, (std::map<int32_t, std::optional<std::string>>{{3, "x"}}));
}

TEST(ChangeSetTest, ChangesOfOtherTablesAndNullKeysAreHandled) {
  ChangeSet cs({Table()});
  ASSERT_TRUE(Feed(&cs, {Relation(99, "public", "other", {{true, "id", 23}}), Begin(0x100, 1),
                         Insert(99, {Int4(1)}), Commit(0x100, 0x108)})
                  .ok());
  EXPECT_EQ(cs.pending_changes(), 0u);
  Status s = Feed(&cs, {Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}}),
                        Begin(0x200, 2), Insert(kRel, {Null(), Text("x")})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("key column"), std::string::npos) << s.message();
}

// ---- DDL the stream does not announce ----

V Int8(int64_t v) { return {'b', B64(uint64_t(v))}; }

// The table as discovered after ALTER COLUMN id TYPE bigint.
ChangeTable BigintTable() {
  ChangeTable t = Table();
  t.wires = {PgWire::kInt8, PgWire::kText};
  t.type_oids = {20, 25};
  auto s = std::make_shared<Schema>(*t.schema);
  s->fields[0].type = DataType::Int64();
  t.schema = s;
  return t;
}

std::pair<std::map<int64_t, std::string>, std::set<int64_t>> Take64(ChangeSet* cs) {
  std::map<int64_t, std::string> upserts;
  std::set<int64_t> deletes;
  Status s = cs->TakeBatches(100, [&](size_t, Batch& b, bool del) {
    for (size_t r = 0; r < b.num_rows(); ++r) {
      const int64_t id = b.column(0).values<int64_t>()[r];
      if (del) {
        deletes.insert(id);
      } else {
        upserts[id] = std::string(b.column(1).GetBytes(r));
      }
    }
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return {upserts, deletes};
}

// Changes from before an ALTER COLUMN ... TYPE come with a relation message of the old type: once
// told, the set takes their values in the old form and widens them, so that an old key and a new
// key of the same value are one key.
TEST(ChangeSetTest, ValuesOfAColumnsOlderTypeAreWidenedAndKeepTheirKey) {
  ChangeSet cs({BigintTable()});
  ChangeEvent e = ChangeEvent::kNone;
  const std::string old_rel = Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}});
  ASSERT_TRUE(Feed(&cs, {old_rel}, &e).ok());
  ASSERT_EQ(e, ChangeEvent::kSchemaChanged);
  ASSERT_EQ(cs.schema_change().retyped.size(), 1u);
  EXPECT_EQ(cs.schema_change().retyped[0].column, "id");
  EXPECT_EQ(cs.schema_change().retyped[0].type_oid, 23u);
  cs.DecodeOlderType(kRel, "id", 23, PgWire::kInt4);
  ASSERT_TRUE(
      Feed(&cs,
           {old_rel, Begin(0x100, 1), Insert(kRel, {Int4(5), Text("old")}),
            Insert(kRel, {Int4(-6), Text("deleted after the ALTER")}), Commit(0x100, 0x108)},
           &e)
          .ok());
  EXPECT_EQ(e, ChangeEvent::kNone);
  // After the ALTER: the relation's own type, the discovered one.
  ASSERT_TRUE(Feed(&cs,
                   {Relation(kRel, "public", "t", {{true, "id", 20}, {false, "v", 25}}),
                    Begin(0x200, 2), Delete(kRel, 'K', {Int8(-6), Null()}),
                    Insert(kRel, {Int8(int64_t{1} << 40), Text("big")}), Commit(0x200, 0x208)},
                   &e)
                  .ok());
  EXPECT_EQ(e, ChangeEvent::kNone);
  EXPECT_EQ(cs.pending_changes(), 3u);  // 5, -6 (one key across both types), 2^40
  auto [upserts, deletes] = Take64(&cs);
  EXPECT_EQ(upserts, (std::map<int64_t, std::string>{{5, "old"}, {int64_t{1} << 40, "big"}}));
  EXPECT_EQ(deletes, std::set<int64_t>{-6});
  // Only the type it was told of: another one is still a change.
  ASSERT_TRUE(
      Feed(&cs, {Relation(kRel, "public", "t", {{true, "id", 21}, {false, "v", 25}})}, &e).ok());
  EXPECT_EQ(e, ChangeEvent::kSchemaChanged);
}

// A relation of a followed table's name with another OID: nothing is decided at its relation
// message; its first change that counts is reported, and stays out until the caller decides.
TEST(ChangeSetTest, AnotherRelationOfTheNameIsReportedAndSkippedAdoptedOrStoppedAt) {
  constexpr uint32_t kNew = kRel + 10;
  ChangeTable table = Table();
  table.relid = kRel;
  const std::string rel = Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}});
  const std::string recreated = Relation(kNew, "public", "t", {{true, "id", 23}, {false, "v", 25}});
  const std::vector<std::string> before = {
      rel,       Begin(0x100, 1), Insert(kRel, {Int4(1), Text("old table")}), Commit(0x100, 0x108),
      recreated, Begin(0x200, 2)};
  const std::string change = Insert(kNew, {Int4(1), Text("new table")});
  ChangeEvent e = ChangeEvent::kNone;
  // Stopped at: what came before lands.
  ChangeSet stop({table});
  ASSERT_TRUE(Feed(&stop, before, &e).ok());
  EXPECT_EQ(e, ChangeEvent::kNone);
  ASSERT_TRUE(Feed(&stop, {change}, &e).ok());
  ASSERT_EQ(e, ChangeEvent::kRecreated);
  EXPECT_EQ(stop.recreated().table, 0u);
  EXPECT_EQ(stop.recreated().relid, kNew);
  stop.DropTransaction();
  EXPECT_EQ(Take(&stop).upserts, (std::map<int32_t, std::optional<std::string>>{{1, "old table"}}));
  // Skipped: an older table of the name.
  ChangeSet skip({table});
  ASSERT_TRUE(Feed(&skip, before).ok());
  ASSERT_TRUE(Feed(&skip, {change}, &e).ok());
  ASSERT_EQ(e, ChangeEvent::kRecreated);
  skip.SkipRelation(kNew);
  ASSERT_TRUE(Feed(&skip, {change, Commit(0x200, 0x208)}, &e).ok());
  EXPECT_EQ(e, ChangeEvent::kNone);
  EXPECT_EQ(Take(&skip).upserts, (std::map<int32_t, std::optional<std::string>>{{1, "old table"}}));
  // Adopted (source.truncate: ignore): the new relation's changes count, the old one's are the
  // other table's now.
  ChangeSet adopt({table});
  ASSERT_TRUE(Feed(&adopt, before).ok());
  ASSERT_TRUE(Feed(&adopt, {change}, &e).ok());
  ASSERT_EQ(e, ChangeEvent::kRecreated);
  adopt.AdoptRelation(0, kNew);
  ASSERT_TRUE(Feed(&adopt, {change, Commit(0x200, 0x208)}, &e).ok());
  EXPECT_EQ(e, ChangeEvent::kNone);
  EXPECT_EQ(adopt.tables()[0].relid, kNew);
  EXPECT_EQ(Take(&adopt).upserts,
            (std::map<int32_t, std::optional<std::string>>{{1, "new table"}}));
  ASSERT_TRUE(Feed(&adopt, {Begin(0x300, 3), Insert(kRel, {Int4(2), Text("x")})}, &e).ok());
  EXPECT_EQ(e, ChangeEvent::kRecreated);
  EXPECT_EQ(adopt.recreated().relid, kRel);
  // An adopted relation's columns are compared with the table's once adopted.
  ChangeSet wider({table});
  ASSERT_TRUE(Feed(&wider, {Relation(kNew, "public", "t",
                                     {{true, "id", 23}, {false, "v", 25}, {false, "w", 23}}),
                            Begin(0x200, 2)})
                  .ok());
  const std::string wide = Insert(kNew, {Int4(1), Text("v"), Int4(3)});
  ASSERT_TRUE(Feed(&wider, {wide}, &e).ok());
  ASSERT_EQ(e, ChangeEvent::kRecreated);
  wider.AdoptRelation(0, kNew);
  ASSERT_TRUE(Feed(&wider, {wide}, &e).ok());
  EXPECT_EQ(e, ChangeEvent::kSchemaChanged);
  EXPECT_EQ(wider.schema_change().unknown_columns, std::vector<std::string>{"w"});
}

// After a backfill, the log from the backfill's change position on may still hold changes of an
// older table of the name, committed before the backfill's snapshot: they are skipped; one
// committed after it is reported. Transactions the table has (its position) are skipped too.
// In a streamed transaction the commit position is not known yet: reported.
TEST(ChangeSetTest, ChangesOfAnOlderTableBeforeTheBackfillAreSkipped) {
  constexpr uint32_t kOld = kRel - 10;
  ChangeTable table = Table(/*position=*/0x100);
  table.relid = kRel;
  table.since = 0x300;
  const std::string old_rel = Relation(kOld, "public", "t", {{true, "id", 23}, {false, "v", 25}});
  ChangeSet cs({table});
  ChangeEvent e = ChangeEvent::kNone;
  ASSERT_TRUE(Feed(&cs,
                   {old_rel, Begin(0x80, 1), Insert(kOld, {Int4(1), Text("in the table")}),
                    Commit(0x80, 0x88), Begin(0x200, 2), Insert(kOld, {Int4(2), Text("older")}),
                    Commit(0x200, 0x208)},
                   &e)
                  .ok());
  EXPECT_EQ(e, ChangeEvent::kNone);
  EXPECT_EQ(cs.pending_changes(), 0u);
  ASSERT_TRUE(Feed(&cs, {Begin(0x400, 3), Insert(kOld, {Int4(3), Text("newer")})}, &e).ok());
  EXPECT_EQ(e, ChangeEvent::kRecreated);
  cs.DropTransaction();
  ChangeSet streamed({table});
  ASSERT_TRUE(
      Feed(&streamed,
           {StreamStart(10), By(10, old_rel), By(10, Insert(kOld, {Int4(4), Text("streamed")}))},
           &e)
          .ok());
  EXPECT_EQ(e, ChangeEvent::kRecreated);
}

}  // namespace
// ---- ChangeSet with a spill store: what memory gives ----

class ChangeSetSpillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ferry_pg_spill_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

// Plain and streamed transactions (some streamed ones with subtransactions rolled back, some
// aborted whole, interleaved with plain ones), a dropped open transaction, a checkpoint half-way:
// the same messages into a ChangeSet that holds everything in memory and into one that spills
// past a few kB hand out the same changes.
TEST_F(ChangeSetSpillTest, SpilledChangesGiveWhatMemoryGives) {
  const std::string rel = Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}});
  uint32_t rng = 7;
  auto next = [&] {
    rng = rng * 1103515245u + 12345u;
    return (rng >> 8) % 1000;
  };
  std::vector<std::vector<std::string>> rounds(2);
  uint64_t lsn = 0x1000;
  for (auto& msgs : rounds) {
    msgs.push_back(rel);
    for (int txn = 0; txn < 150; ++txn) {
      const uint32_t xid = 100 + static_cast<uint32_t>(txn);
      auto change = [&](int n) {
        const int32_t id = static_cast<int32_t>(next() % 200);
        const std::string v =
            "x" + std::to_string(txn) + "." + std::to_string(n) + std::string(next() % 50, 'p');
        switch (next() % 3) {
          case 0:
            return Insert(kRel, {Int4(id), Text(v)});
          case 1:
            return Update(kRel, 0, {}, {Int4(id), Text(v)});
          default:
            return Delete(kRel, 'K', {Int4(id), Null()});
        }
      };
      lsn += 0x100;
      if (next() % 3 == 0) {
        // Streamed in two blocks, its subtransactions xid*10+1.. sometimes rolled back.
        for (int block = 0; block < 2; ++block) {
          msgs.push_back(StreamStart(xid));
          if (block == 0) msgs.push_back(By(xid, rel));
          const int n = static_cast<int>(next() % 30) + 1;
          for (int i = 0; i < n; ++i) {
            const uint32_t sub = next() % 2 ? xid : xid * 10 + next() % 3;
            msgs.push_back(By(sub, change(i)));
          }
          msgs.push_back(StreamStop());
          // A plain transaction between the blocks.
          msgs.push_back(Begin(lsn + 0x10, xid + 5000, lsn * 2));
          msgs.push_back(change(99));
          msgs.push_back(Commit(lsn + 0x10, lsn + 0x18));
          lsn += 0x20;
        }
        if (next() % 4 == 0) msgs.push_back(StreamAbort(xid, xid * 10 + 1));
        if (next() % 6 == 0) {
          msgs.push_back(StreamAbort(xid, xid));
        } else {
          msgs.push_back(StreamCommit(xid, lsn, lsn + 8, lsn * 3));
        }
      } else {
        msgs.push_back(Begin(lsn, xid, lsn * 5));
        const int n = static_cast<int>(next() % 40) + 1;
        for (int i = 0; i < n; ++i) msgs.push_back(change(i));
        msgs.push_back(Commit(lsn, lsn + 8));
      }
    }
  }
  ChangeSet plain({Table(0x4000)});
  ChangeSet spilled({Table(0x4000)});  // transactions before 0x4000 are in the table already
  ChangeSpill spill(dir_, "temp_dir");
  spilled.SetSpill(&spill, 3000);
  for (const auto& msgs : rounds) {
    ASSERT_TRUE(Feed(&plain, msgs).ok());
    ASSERT_TRUE(Feed(&spilled, msgs).ok());
    EXPECT_GT(spill.disk_bytes(), 0u);
    Seen a = Take(&plain);
    Seen b = Take(&spilled);
    EXPECT_EQ(b.upserts, a.upserts);
    EXPECT_EQ(b.deletes, a.deletes);
    EXPECT_EQ(b.origins, a.origins);  // streamed transactions' runs stamped at their commit
    EXPECT_GT(a.upserts.size() + a.deletes.size(), 50u);
    EXPECT_EQ(spill.disk_bytes(), 0u);
  }
  // An open transaction that spilled and is dropped leaves nothing.
  ASSERT_TRUE(
      Feed(&spilled, {Begin(0x900000, 9), Insert(kRel, {Int4(1), Text(std::string(5000, 'z'))}),
                      Insert(kRel, {Int4(2), Text(std::string(5000, 'z'))})})
          .ok());
  EXPECT_GT(spill.disk_bytes(), 0u);
  spilled.DropTransaction();
  EXPECT_EQ(spill.disk_bytes(), 0u);
  EXPECT_TRUE(Take(&spilled).upserts.empty());
}

// An unchanged TOASTed value whose earlier change went to disk is looked up, not taken from an
// older change still in memory.
TEST_F(ChangeSetSpillTest, AnUnchangedValueWhoseEarlierChangeIsOnDiskIsLookedUp) {
  ChangeSet cs({Table()});
  ChangeSpill spill(dir_, "temp_dir");
  cs.SetSpill(&spill, 3000);
  const std::string rel = Relation(kRel, "public", "t", {{true, "id", 23}, {false, "v", 25}});
  ASSERT_TRUE(
      Feed(&cs, {rel, Begin(0x100, 1), Insert(kRel, {Int4(1), Text("old")}), Commit(0x100, 0x108),
                 Begin(0x200, 2), Update(kRel, 0, {}, {Int4(1), Text(std::string(4000, 'n'))}),
                 Update(kRel, 0, {}, {Int4(1), Unchanged()}), Commit(0x200, 0x208)})
          .ok());
  EXPECT_GT(spill.disk_bytes(), 0u);
  int asked = 0;
  Seen s = Take(&cs, [&](size_t, const std::vector<std::vector<std::string>>& keys,
                         std::vector<ChangeSet::Row>* rows) {
    asked += static_cast<int>(keys.size());
    rows->assign(keys.size(),
                 std::vector<std::optional<std::string>>{B32(1), std::string(4000, 'n')});
    return Status::OK();
  });
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(s.upserts,
            (std::map<int32_t, std::optional<std::string>>{{1, std::string(4000, 'n')}}));
}

}  // namespace ferry::source::pg
