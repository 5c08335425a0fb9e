#include "ferry/source/mysql/binlog_changes.h"

#include <stdlib.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

namespace ferry::source {
namespace {

using Row = std::vector<std::optional<std::string_view>>;

BinlogTable Items(Position position) {
  BinlogTable t;
  t.stream = "items";
  t.display = "shop.items";
  t.columns = {"id", "name"};
  t.wires = {MysqlWire::kInt32, MysqlWire::kText};
  t.key = {0};
  Schema s;
  s.fields.push_back(Field{1, "id", DataType::Int32(), true});
  s.fields.push_back(Field{2, "name", DataType::String(), false});
  t.schema = std::make_shared<const Schema>(s);
  t.position = position;
  return t;
}

std::string OriginText(const RowOrigin& o) {
  static const char* kOps[] = {"read", "insert", "update", "delete"};
  return std::string(" ") + kOps[static_cast<int>(o.op)] + " " + std::to_string(o.commit_us) + " " +
         Position::Of(o).ToString();
}

// What TakeBatches hands out: upserts by id -> name (NULL as "<null>"), deletes as ids (and the
// deleted rows' last names: the full row image).
struct Taken {
  std::map<int32_t, std::string> upserts;
  std::vector<int32_t> deletes;
  std::map<int32_t, std::string> deleted_names;
};
Taken Take(BinlogChanges& c) {
  Taken out;
  EXPECT_TRUE(c.TakeBatches(100, [&](size_t, Batch& b, bool deletes) {
                 for (size_t r = 0; r < b.num_rows(); ++r) {
                   const int32_t id = b.column(0).ValueAt<int32_t>(r);
                   if (deletes) {
                     out.deletes.push_back(id);
                     if (b.column(1).IsValid(r)) {
                       out.deleted_names[id] = std::string(b.column(1).GetBytes(r));
                     }
                   } else {
                     out.upserts[id] = b.column(1).IsValid(r) ? std::string(b.column(1).GetBytes(r))
                                                              : std::string("<null>");
                   }
                 }
                 return true;
               }).ok());
  std::sort(out.deletes.begin(), out.deletes.end());
  return out;
}

TEST(BinlogChangesTest, TheLastChangeOfAKeyInCommittedTransactionsWins) {
  BinlogChanges c({Items(Position::Binlog(1, 100))});
  ASSERT_TRUE(c.Put(0, false, Row{"1", "a"}).ok());
  ASSERT_TRUE(c.Update(0, Row{"1", "a"}, Row{"1", "b"}).ok());
  ASSERT_TRUE(c.Put(0, false, Row{"2", std::nullopt}).ok());
  ASSERT_TRUE(c.Put(0, true, Row{"3", "gone"}).ok());
  c.Commit(Position::Binlog(1, 200));
  EXPECT_EQ(c.pending_changes(), 3u);
  Taken t = Take(c);
  EXPECT_EQ(t.upserts, (std::map<int32_t, std::string>{{1, "b"}, {2, "<null>"}}));
  EXPECT_EQ(t.deletes, std::vector<int32_t>{3});
  EXPECT_EQ(t.deleted_names, (std::map<int32_t, std::string>{{3, "gone"}}));
  EXPECT_EQ(c.pending_changes(), 0u);
  EXPECT_TRUE(Take(c).upserts.empty());
}

// Each change says what it was, and when and where its transaction ended (set at the commit).
TEST(BinlogChangesTest, EveryChangeCarriesItsKindCommitTimeAndEnd) {
  BinlogChanges c({Items(Position::Binlog(1, 100))});
  ASSERT_TRUE(c.Put(0, RowOrigin::Op::kInsert, Row{"1", "a"}).ok());
  ASSERT_TRUE(c.Put(0, RowOrigin::Op::kInsert, Row{"2", "b"}).ok());
  c.Commit(Position::Binlog(1, 200), 1700000000000000);
  ASSERT_TRUE(c.Update(0, Row{"1", "a"}, Row{"1", "c"}).ok());
  ASSERT_TRUE(c.Put(0, RowOrigin::Op::kDelete, Row{"2", "b"}).ok());
  ASSERT_TRUE(c.Update(0, Row{"5", "x"}, Row{"6", "x"}).ok());
  c.Commit(Position::Binlog(2, 40), 1700000001000000);
  std::map<int32_t, std::string> seen;
  ASSERT_TRUE(c.TakeBatches(100, [&](size_t, Batch& b, bool) {
                 EXPECT_EQ(b.origins().size(), b.num_rows());
                 for (size_t r = 0; r < b.num_rows(); ++r) {
                   seen[b.column(0).ValueAt<int32_t>(r)] = OriginText(b.origins().at(r));
                 }
                 return true;
               }).ok());
  EXPECT_EQ(seen, (std::map<int32_t, std::string>{
                      {1, " update 1700000001000000 binlog 000002:40"},
                      {2, " delete 1700000001000000 binlog 000002:40"},
                      {5, " delete 1700000001000000 binlog 000002:40"},
                      {6, " update 1700000001000000 binlog 000002:40"},
                  }));
}

TEST(BinlogChangesTest, AnUpdateThatChangesTheKeyDeletesTheOldRow) {
  BinlogChanges c({Items(Position::Binlog(1, 100))});
  ASSERT_TRUE(c.Update(0, Row{"5", "x"}, Row{"-5", "x"}).ok());
  c.Commit(Position::Binlog(1, 200));
  Taken t = Take(c);
  EXPECT_EQ(t.upserts, (std::map<int32_t, std::string>{{-5, "x"}}));
  EXPECT_EQ(t.deletes, std::vector<int32_t>{5});
  EXPECT_EQ(t.deleted_names, (std::map<int32_t, std::string>{{5, "x"}}));
  // A before image of the key alone: the whole one is asked for only when the key moved, and
  // the deleted row is that whole image.
  int asked = 0;
  const Row whole{"7", "old name"};
  auto whole_before = [&]() -> Result<const Row*> {
    ++asked;
    return &whole;
  };
  ASSERT_TRUE(
      c.Update(0, Row{"6", std::nullopt}, Row{"6", "same key"}, nullptr, whole_before).ok());
  EXPECT_EQ(asked, 0);
  ASSERT_TRUE(c.Update(0, Row{"7", std::nullopt}, Row{"8", "moved"}, nullptr, whole_before).ok());
  EXPECT_EQ(asked, 1);
  c.Commit(Position::Binlog(1, 300));
  t = Take(c);
  EXPECT_EQ(t.upserts, (std::map<int32_t, std::string>{{6, "same key"}, {8, "moved"}}));
  EXPECT_EQ(t.deleted_names, (std::map<int32_t, std::string>{{7, "old name"}}));
  // Its failure is the update's.
  ASSERT_FALSE(
      c.Update(0, Row{"9", std::nullopt}, Row{"10", "x"}, nullptr, []() -> Result<const Row*> {
         return Status::Corruption("cut short");
       }).ok());
}

TEST(BinlogChangesTest, TransactionsEndingAtOrBeforeTheTablesPositionAreSkipped) {
  BinlogChanges c({Items(Position::Binlog(2, 500))});
  ASSERT_TRUE(c.Put(0, false, Row{"1", "old"}).ok());
  c.Commit(Position::Binlog(1, 900));  // an earlier file
  ASSERT_TRUE(c.Put(0, false, Row{"2", "at"}).ok());
  c.Commit(Position::Binlog(2, 500));  // ends exactly at the position: in the table
  ASSERT_TRUE(c.Put(0, false, Row{"3", "new"}).ok());
  c.Commit(Position::Binlog(2, 501));
  EXPECT_EQ(Take(c).upserts, (std::map<int32_t, std::string>{{3, "new"}}));
}

TEST(BinlogChangesTest, ADroppedTransactionLeavesNothing) {
  BinlogChanges c({Items(Position::Binlog(1, 4))});
  ASSERT_TRUE(c.Put(0, false, Row{"1", "kept"}).ok());
  c.Commit(Position::Binlog(1, 100));
  ASSERT_TRUE(c.Put(0, false, Row{"1", "dropped"}).ok());
  ASSERT_TRUE(c.Put(0, false, Row{"2", "dropped"}).ok());
  c.DropTransaction();
  EXPECT_EQ(c.pending_changes(), 1u);
  EXPECT_EQ(Take(c).upserts, (std::map<int32_t, std::string>{{1, "kept"}}));
}

TEST(BinlogChangesTest, ANullKeyAndAValueThatDoesNotConvertAreErrorsNamingTheTable) {
  BinlogChanges c({Items(Position::Binlog(1, 4))});
  Status s = c.Put(0, false, Row{std::nullopt, "x"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("shop.items"), std::string::npos) << s.message();
  ASSERT_TRUE(c.Put(0, false, Row{"99999999999", "too big"}).ok());
  c.Commit(Position::Binlog(1, 100));
  Status t = c.TakeBatches(100, [](size_t, Batch&, bool) { return true; });
  EXPECT_EQ(t.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.message().find("table shop.items, column id"), std::string::npos) << t.message();
}

}  // namespace
}  // namespace ferry::source

namespace ferry::source {
namespace {

// A random mix of changes, with transactions that commit, are dropped, or are already in the
// second table, applied with and without a spill store of a tiny memory limit: both hand out
// the same changes.
// Values the decoder gives in binary form are held so (in memory and in spill runs) and come out
// as the same typed values; one that does not fit its column is refused naming it.
TEST(BinlogChangesTest, ValuesInBinaryFormAreHeldAndConverted) {
  BinlogTable t;
  t.stream = "orders";
  t.display = "shop.orders";
  t.columns = {"id", "qty", "amount", "note"};
  t.wires = {MysqlWire::kInt32, MysqlWire::kInt32, MysqlWire::kDecimal, MysqlWire::kText};
  t.key = {0};
  Schema schema;
  schema.fields.push_back(Field{1, "id", DataType::Int32(), true});
  schema.fields.push_back(Field{2, "qty", DataType::Int32(), false});
  schema.fields.push_back(Field{3, "amount", DataType::Decimal(12, 2), false});
  schema.fields.push_back(Field{4, "note", DataType::String(), false});
  t.schema = std::make_shared<const Schema>(schema);
  t.position = Position::Binlog(1, 100);
  const std::vector<bool> typed = {false, true, true, false};
  char tmpl[] = "/tmp/ferry_binlog_typed_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  for (bool spilling : {false, true}) {
    BinlogChanges c({t});
    ChangeSpill spill(tmpl, "temp_dir");
    if (spilling) c.SetSpill(&spill, 300);
    std::vector<std::string> held;
    held.reserve(300);
    for (int i = 0; i < 100; ++i) {
      held.push_back(std::to_string(i % 40));
      held.push_back(MysqlBinaryInt64(-i));
      held.push_back(MysqlBinaryDecimal(int128_t{i} * 100 + 5, 2));
      const size_t at = held.size();
      ASSERT_TRUE(c.Put(0, RowOrigin::Op::kInsert,
                        Row{held[at - 3], held[at - 2], held[at - 1],
                            i % 3 ? "n" : std::optional<std::string_view>()},
                        &typed)
                      .ok());
      if (i % 10 == 9) c.Commit(Position::Binlog(1, 200 + static_cast<uint64_t>(i)));
    }
    EXPECT_EQ(spill.disk_bytes() > 0, spilling);
    std::map<int32_t, std::pair<int32_t, int64_t>> got;
    ASSERT_TRUE(c.TakeBatches(64, [&](size_t, Batch& b, bool) {
                   for (size_t r = 0; r < b.num_rows(); ++r) {
                     got[b.column(0).ValueAt<int32_t>(r)] = {
                         b.column(1).ValueAt<int32_t>(r),
                         static_cast<int64_t>(b.column(2).ValueAt<int128_t>(r))};
                   }
                   return true;
                 }).ok());
    ASSERT_EQ(got.size(), 40u) << spilling;
    for (int id = 0; id < 40; ++id) {
      const int last = id + 40 * ((99 - id) / 40);  // the key's last change
      EXPECT_EQ(got[id], (std::pair<int32_t, int64_t>{-last, last * 100 + 5})) << id;
    }
  }
  // A qty beyond 32 bits in the log (the column was widened since discovery): refused, named.
  BinlogChanges c({t});
  const std::string big = MysqlBinaryInt64(int64_t{1} << 40);
  const std::string amount = MysqlBinaryDecimal(1, 2);
  ASSERT_TRUE(c.Put(0, RowOrigin::Op::kInsert, Row{"1", big, amount, "n"}, &typed).ok());
  c.Commit(Position::Binlog(1, 300));
  Status s = c.TakeBatches(64, [](size_t, Batch&, bool) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("shop.orders, column qty"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1099511627776 does not fit a 32-bit int"), std::string::npos)
      << s.message();
  std::filesystem::remove_all(tmpl);
}

TEST(BinlogChangesSpillTest, SpilledChangesGiveWhatMemoryGives) {
  char tmpl[] = "/tmp/ferry_binlog_spill_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  for (int round = 0; round < 3; ++round) {
    auto make = [&] {
      BinlogTable other = Items(Position::Binlog(1, 5000));
      other.stream = "other";
      return std::vector<BinlogTable>{Items(Position::Binlog(1, 100)), other};
    };
    BinlogChanges plain(make()), spilled(make());
    ChangeSpill spill(dir, "temp_dir");
    spilled.SetSpill(&spill, 2000);  // a few dozen changes
    uint32_t rng = 12345 + static_cast<uint32_t>(round);
    auto next = [&] {
      rng = rng * 1103515245u + 12345u;
      return (rng >> 8) % 1000;
    };
    std::vector<std::string> values;
    values.reserve(20000);
    uint64_t pos = 10;
    bool spilled_any = false;
    for (int txn = 0; txn < 200; ++txn) {
      const int n = static_cast<int>(next() % 40) + 1;
      for (int i = 0; i < n; ++i) {
        values.push_back(std::to_string(next() % 300));
        values.push_back("v" + std::to_string(txn) + "." + std::to_string(i));
        const std::string& id = values[values.size() - 2];
        const std::string& name = values.back();
        const size_t t = next() % 2;
        const bool del = next() % 5 == 0;
        for (BinlogChanges* c : {&plain, &spilled}) {
          ASSERT_TRUE(c->Put(t, del, Row{id, name}).ok());
        }
      }
      spilled_any = spilled_any || spill.disk_bytes() > 0;
      pos += 50;
      const bool drop = next() % 10 == 0;
      for (BinlogChanges* c : {&plain, &spilled}) {
        if (drop) {
          c->DropTransaction();
        } else {
          c->Commit(Position::Binlog(1, pos), static_cast<int64_t>(pos) * 1000000);
        }
      }
      if (txn == 120) {
        // A checkpoint half-way: what was held is handed out and the rest goes on.
        std::map<std::pair<size_t, int32_t>, std::string> a, b;
        for (auto [c, out] : {std::pair{&plain, &a}, std::pair{&spilled, &b}}) {
          ASSERT_TRUE(c->TakeBatches(64, [&, out = out](size_t t, Batch& batch, bool deletes) {
                         for (size_t r = 0; r < batch.num_rows(); ++r) {
                           (*out)[{t, batch.column(0).ValueAt<int32_t>(r)}] =
                               (deletes ? "<deleted>" : std::string(batch.column(1).GetBytes(r))) +
                               OriginText(batch.origins().at(r));
                         }
                         return true;
                       }).ok());
        }
        EXPECT_EQ(b, a);
      }
    }
    EXPECT_TRUE(spilled_any);
    auto all = [](BinlogChanges& c) {
      std::map<std::pair<size_t, int32_t>, std::string> out;
      EXPECT_TRUE(c.TakeBatches(64, [&](size_t t, Batch& b, bool deletes) {
                     for (size_t r = 0; r < b.num_rows(); ++r) {
                       out[{t, b.column(0).ValueAt<int32_t>(r)}] =
                           (deletes ? "<deleted>" : std::string(b.column(1).GetBytes(r))) +
                           OriginText(b.origins().at(r));
                     }
                     return true;
                   }).ok());
      return out;
    };
    const auto want = all(plain);
    const auto got = all(spilled);
    EXPECT_EQ(got, want);
    EXPECT_GT(want.size(), 100u);
    EXPECT_EQ(spill.disk_bytes(), 0u);  // every run dropped once taken
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ferry::source
