#include "ferry/engine/progress.h"

#include <gtest/gtest.h>

namespace ferry::engine {
namespace {

// The records here hold PostgreSQL positions (LSNs); their JSON is the bare number.
constexpr auto kLsn = source::Position::Kind::kLsn;
source::Position L(int64_t n) { return source::Position::Lsn(static_cast<uint64_t>(n)); }

FullRefreshProgress Load(const std::string& run, std::initializer_list<int64_t> committed,
                         bool published = false) {
  FullRefreshProgress p;
  p.stream = "orders";
  p.run = run;
  p.plan.first = 1;
  p.plan.step = 100;
  p.plan.count = 5;
  for (int64_t i : committed) p.committed.Add(i);
  p.published = published;
  return p;
}

TEST(IndexSetTest, MergesNeighboursAndCounts) {
  IndexSet s;
  for (int64_t i : {0, 1, 2, 5, 4, 9}) s.Add(i);
  EXPECT_EQ(s.ToJson().dump(), "[[0,3],[4,6],[9,10]]");
  EXPECT_EQ(s.Count(), 6);
  EXPECT_TRUE(s.Contains(4));
  EXPECT_FALSE(s.Contains(3));
  s.Add(3);
  EXPECT_EQ(s.ToJson().dump(), "[[0,6],[9,10]]");
  auto back = IndexSet::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == s);
  EXPECT_FALSE(IndexSet::FromJson(Json::parse("[[3,1]]")).ok());
}

// The recovery decision table: state x marker -> what the next sync does.
TEST(DecideFullRefreshTest, NoStateNoMarkerStartsFresh) {
  auto d = DecideFullRefresh(nullptr, nullptr, kLsn);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Action::kStartNewRun);
}

TEST(DecideFullRefreshTest, StateAndMarkerAgreeResumesWithoutRepair) {
  auto p = Load("r1", {0, 1});
  auto d = DecideFullRefresh(p.ToJson(), p.ToJson(), kLsn);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Action::kResume);
  EXPECT_FALSE(d->state_behind);
  EXPECT_EQ(d->progress.committed.Count(), 2);
}

TEST(DecideFullRefreshTest, MarkerAheadSkipsCommittedChunksAndRepairsState) {
  // Crash after the commit of chunk 2, before the state write.
  auto d = DecideFullRefresh(Load("r1", {0, 1}).ToJson(), Load("r1", {0, 1, 2}).ToJson(), kLsn);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Action::kResume);
  EXPECT_TRUE(d->state_behind);
  EXPECT_TRUE(d->progress.committed.Contains(2));
}

TEST(DecideFullRefreshTest, StateAheadOfMarkerKeepsTheState) {
  // The marker can never be behind the state for the same run (the state is written after
  // the commit), but if it were, nothing committed would be re-read.
  auto d = DecideFullRefresh(Load("r1", {0, 1, 2}).ToJson(), Load("r1", {0}).ToJson(), kLsn);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->progress.committed.Count(), 3);
  EXPECT_FALSE(d->state_behind);
}

TEST(DecideFullRefreshTest, PublishedMarkerFinishesTheStreamWithoutWork) {
  auto d = DecideFullRefresh(Load("r1", {0, 1, 2, 3, 4}).ToJson(),
                             Load("r1", {0, 1, 2, 3, 4}, true).ToJson(), kLsn);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Action::kAlreadyPublished);
  EXPECT_TRUE(d->progress.published);
}

TEST(DecideFullRefreshTest, CompletedStateStartsANewLoad) {
  auto done = Load("r1", {0, 1, 2, 3, 4}, true);
  auto d = DecideFullRefresh(done.ToJson(), done.ToJson(), kLsn);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Action::kStartNewRun);
}

TEST(DecideFullRefreshTest, MarkerOfAnOlderRunDoesNotCountForTheNewOne) {
  auto d =
      DecideFullRefresh(Load("r2", {}).ToJson(), Load("r1", {0, 1, 2, 3, 4}, true).ToJson(), kLsn);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Action::kResume);
  EXPECT_EQ(d->progress.run, "r2");
  EXPECT_EQ(d->progress.committed.Count(), 0);
}

TEST(DecideFullRefreshTest, LostStateResumesAnUnfinishedLoadFromTheMarker) {
  auto d = DecideFullRefresh(nullptr, Load("r1", {0, 3}).ToJson(), kLsn);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Action::kResume);
  EXPECT_TRUE(d->state_behind);
  EXPECT_EQ(d->progress.run, "r1");
}

TEST(DecideFullRefreshTest, ChunksTheTableLostAreLoadedAgain) {
  // The state counts chunks of run r2 as committed, but the table has no marker (dropped) or
  // another run's: resuming would skip those chunks forever.
  for (const Json& marker : {Json(nullptr), Load("r1", {0, 1, 2, 3, 4}, true).ToJson()}) {
    auto d = DecideFullRefresh(Load("r2", {0, 1}).ToJson(), marker, kLsn);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->action, Action::kStartNewRun) << marker.dump();
    EXPECT_NE(d->explanation.find("no marker of that run"), std::string::npos);
  }
  // A load planned but with nothing committed yet has no marker to show: it resumes.
  auto d = DecideFullRefresh(Load("r2", {}).ToJson(), nullptr, kLsn);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Action::kResume);
}

TEST(DecideCdcTest, ABackfilledTableWithoutMarkerIsLostNotSkipped) {
  CdcProgress applied{"orders", L(500), L(400)};
  auto d = DecideCdc(applied.ToJson(), nullptr, /*backfilled=*/true, kLsn);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kCorruption);
  EXPECT_NE(d.status().message().find("remove the stream's entry"), std::string::npos);
  // cdc_only: the first changes may not have landed yet; the state's position stands.
  d = DecideCdc(applied.ToJson(), nullptr, /*backfilled=*/false, kLsn);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->backfill);
  EXPECT_EQ(d->position, L(500));
  // ... unless the state says something of the stream's had landed: then the table was lost.
  CdcProgress landed{"orders", L(500), L(400), /*landed=*/true};
  d = DecideCdc(landed.ToJson(), nullptr, /*backfilled=*/false, kLsn);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kCorruption);
  EXPECT_NE(d.status().message().find("cdc_only"), std::string::npos) << d.status().ToString();
  // The marker ahead of the state repairs it.
  CdcProgress ahead{"orders", L(700), L(500)};
  d = DecideCdc(applied.ToJson(), ahead.ToJson(), true, kLsn);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->position, L(700));
  EXPECT_TRUE(d->state_behind);
}

// The table a stream's changes are of travels with its records; a marker of another table (one
// dropped and created again since) is not gone on from once the state entry is removed.
TEST(DecideCdcTest, TheTableTheChangesAreOfComesWithTheRecordThatProvesThePosition) {
  CdcProgress state{"orders", L(500), L(400), true, "16384", L(650)};
  CdcProgress marker{"orders", L(700), L(500), true, "16390"};
  auto d = DecideCdc(state.ToJson(), state.ToJson(), true, kLsn, "16390");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->backfill);
  EXPECT_EQ(d->table_id, "16384");  // the source stops at the new table, once told so
  EXPECT_EQ(d->table_since, L(650));
  d = DecideCdc(state.ToJson(), marker.ToJson(), true, kLsn, "16390");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->position, L(700));
  EXPECT_EQ(d->table_id, "16390");
  EXPECT_EQ(d->table_since, L(0));
  // Without a state entry, a marker of the table as it is now is gone on from ...
  d = DecideCdc(nullptr, marker.ToJson(), true, kLsn, "16390");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->backfill);
  EXPECT_TRUE(d->state_behind);
  // ... and one of another table starts the stream over (cdc: a new backfill).
  d = DecideCdc(nullptr, marker.ToJson(), true, kLsn, "16401");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->backfill);
  EXPECT_EQ(d->full.action, Action::kStartNewRun);
  EXPECT_NE(d->explanation.find("dropped since"), std::string::npos) << d->explanation;
  // A record that names no table (an older ferry's) is taken as it is.
  d = DecideCdc(nullptr, CdcProgress{"orders", L(700), L(500)}.ToJson(), true, kLsn, "16401");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->backfill);
  EXPECT_TRUE(d->table_id.empty());
  // A published backfill hands its table and snapshot position on.
  FullRefreshProgress fr;
  fr.run = "r";
  fr.plan.count = 1;
  fr.published = true;
  fr.cdc_start = L(300);
  fr.table_id = "16384";
  fr.table_since = L(340);
  auto back = FullRefreshProgress::FromJson(fr.ToJson(), "test", kLsn);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->table_id, "16384");
  EXPECT_EQ(back->table_since, L(340));
  d = DecideCdc(fr.ToJson(), fr.ToJson(), true, kLsn, "16384");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->position, L(300));
  EXPECT_EQ((std::pair{d->table_id, d->table_since}), (std::pair{std::string("16384"), L(340)}));
  // Once the position is past the snapshot, the record no longer carries it.
  EXPECT_TRUE(
      CdcProgress({"orders", L(300), L(200), true, "1", L(340)}).ToJson().contains("table_since"));
  EXPECT_FALSE(
      CdcProgress({"orders", L(340), L(300), true, "1", L(340)}).ToJson().contains("table_since"));
}

TEST(DecideFullRefreshTest, CorruptRecordsAreErrorsNotGuesses) {
  auto d = DecideFullRefresh(Json{{"mode", "full_refresh"}, {"run", 5}}, nullptr, kLsn);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kCorruption);
  // Values of the wrong type are refused, not thrown.
  FullRefreshProgress p;
  p.run = "r";
  p.plan.count = 3;
  p.plan.bounds = {10, 20};
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, Json>>{{"step", "x"},
                                                 {"first", 1.5},
                                                 {"rows", Json::array()},
                                                 {"bounds", Json{20, 10}},
                                                 {"bounds", Json{10}},
                                                 {"bounds", Json{10, "20"}}}) {
    Json j = p.ToJson();
    j["plan"][key] = value;
    auto bad = DecideFullRefresh(j, nullptr, kLsn);
    ASSERT_FALSE(bad.ok()) << key << " " << value.dump();
    EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
  }
}

TEST(FullRefreshProgressTest, APlanOfBoundariesRoundTrips) {
  FullRefreshProgress p;
  p.run = "r";
  p.plan.count = 4;
  p.plan.bounds = {-9000000000000000000, 5, 7000000000000000000};
  p.plan.rows = 12345;
  p.plan.key = "id";
  auto back = FullRefreshProgress::FromJson(p.ToJson(), "test", kLsn);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->plan.bounds, p.plan.bounds);
  EXPECT_EQ(back->plan.rows, 12345);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(back->plan.At(i).Id("t"), p.plan.At(i).Id("t"));
  EXPECT_EQ(p.plan.At(0).Id("t"), "t[,-9000000000000000000)");
  EXPECT_EQ(p.plan.At(3).Id("t"), "t[7000000000000000000,)");
}

TEST(LandedTest, AMarkerReadBackTellsWhetherTheCommitLanded) {
  FullRefreshProgress p;
  p.run = "r1";
  p.plan.count = 4;
  p.plan.first = 0;
  p.plan.step = 10;
  p.committed.Add(2);
  EXPECT_TRUE(ChunkLanded(p.ToJson(), "r1", 2, kLsn));
  EXPECT_FALSE(ChunkLanded(p.ToJson(), "r1", 3, kLsn));
  EXPECT_FALSE(ChunkLanded(p.ToJson(), "r0", 2, kLsn));
  EXPECT_FALSE(LoadPublished(p.ToJson(), "r1", kLsn));
  p.published = true;
  EXPECT_TRUE(LoadPublished(p.ToJson(), "r1", kLsn));
  EXPECT_FALSE(ChunkLanded(Json("not a marker"), "r1", 2, kLsn));
  const Json window{{"mode", "incremental"}, {"window", "items@5#x"}};
  EXPECT_TRUE(WindowLanded(window, "items@5#x"));
  EXPECT_FALSE(WindowLanded(window, "items@6#x"));
  const Json cdc{{"mode", "cdc"}, {"position", 700}};
  EXPECT_TRUE(ChangesLanded(cdc, L(700), kLsn));
  EXPECT_TRUE(ChangesLanded(cdc, L(650), kLsn));  // later changes applied too
  EXPECT_FALSE(ChangesLanded(cdc, L(701), kLsn));
  EXPECT_FALSE(ChangesLanded(Json{{"mode", "cdc"}, {"position", "700"}}, L(1), kLsn));
  EXPECT_FALSE(ChangesLanded(window, L(1), kLsn));
}

TEST(FullRefreshProgressTest, APlanOfKeyValuesRoundTripsAndDamageIsCorruption) {
  FullRefreshProgress p;
  p.run = "r";
  p.plan.count = 3;
  p.plan.key = R"(["tenant","name"])";
  p.plan.key_bounds = {Json{"7", "O'Brien ✓"}, Json{"7", "zebra"}};
  auto back = FullRefreshProgress::FromJson(p.ToJson(), "test", kLsn);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->plan.key_bounds, p.plan.key_bounds);
  const source::Chunk first = back->plan.At(0);
  const source::Chunk mid = back->plan.At(1);
  const source::Chunk last = back->plan.At(2);
  EXPECT_TRUE(first.lo_key.is_null());
  EXPECT_EQ(first.hi_key, mid.lo_key);
  EXPECT_EQ(mid.hi_key, last.lo_key);
  EXPECT_TRUE(last.hi_key.is_null());
  EXPECT_EQ(mid.Id("t"), R"(t[["7","O'Brien ✓"],["7","zebra"]))");
  EXPECT_NE(first.Id("t"), last.Id("t"));
  for (const Json& damaged : {Json{Json{"7", "a"}}, Json{Json{"7", "a"}, Json{"7", "a"}},
                              Json{Json{"7", "a"}, Json{7, "b"}}, Json{Json{"7", "a"}, Json{"8"}},
                              Json{Json{"7", "a"}, Json::array()}, Json{"7", "8"}}) {
    Json j = p.ToJson();
    j["plan"]["key_bounds"] = damaged;
    auto bad = FullRefreshProgress::FromJson(j, "test", kLsn);
    ASSERT_FALSE(bad.ok()) << damaged.dump();
    EXPECT_EQ(bad.status().code(), StatusCode::kCorruption) << damaged.dump();
  }
}

}  // namespace
}  // namespace ferry::engine

namespace ferry::engine {
namespace {

IncrementalProgress Window(const Json& from, const Json& to) {
  IncrementalProgress p;
  p.stream = "items";
  p.cursor_column = "updated_at";
  p.from = from;
  p.cursor = to;
  p.window = IncrementalProgress::WindowId("items", from, std::nullopt);
  return p;
}

TEST(DecideIncrementalTest, FirstRunReadsEverything) {
  auto d = DecideIncremental("items", "updated_at", nullptr, nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->start.cursor.is_null());
  EXPECT_FALSE(d->state_behind);
}

TEST(DecideIncrementalTest, StateAndMarkerAgreeContinuesFromTheState) {
  auto w = Window(10, 20);
  auto d = DecideIncremental("items", "updated_at", w.ToJson(), w.ToJson());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->start.cursor, 20);
  EXPECT_FALSE(d->state_behind);
}

TEST(DecideIncrementalTest, MarkerOfTheWindowStartingAtTheStateFinishesItFromTheMarker) {
  // The window (20, 35] committed; the crash came before the state write.
  auto d =
      DecideIncremental("items", "updated_at", Window(10, 20).ToJson(), Window(20, 35).ToJson());
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->state_behind);
  EXPECT_EQ(d->start.cursor, 35);
  EXPECT_NE(d->explanation.find("nothing re-read"), std::string::npos);
}

TEST(DecideIncrementalTest, LostStateAndAFirstWindowInTheTableResumesAfterIt) {
  auto d = DecideIncremental("items", "updated_at", nullptr, Window(nullptr, 50).ToJson());
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->state_behind);
  EXPECT_EQ(d->start.cursor, 50);
}

TEST(DecideIncrementalTest, ATableThatLostItsLandedRowsIsReportedNotTopUpped) {
  auto w = Window(10, 20);
  // Nothing landed yet (windows without rows): no marker is expected.
  auto d = DecideIncremental("items", "updated_at", w.ToJson(), nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->start.cursor, 20);
  w.landed = true;
  d = DecideIncremental("items", "updated_at", w.ToJson(), nullptr);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kCorruption);
  EXPECT_NE(d.status().message().find("remove the stream's entry"), std::string::npos);
  // With the marker there, it goes on and keeps the fact.
  d = DecideIncremental("items", "updated_at", w.ToJson(), w.ToJson());
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->start.landed);
}

TEST(DecideIncrementalTest, AChangedCursorColumnIsRefused) {
  auto d = DecideIncremental("items", "id", Window(1, 2).ToJson(), nullptr);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("was 'updated_at' and is now 'id'"), std::string::npos);
}

TEST(DecideIncrementalTest, AFullRefreshRecordIsNotACursor) {
  FullRefreshProgress fr;
  fr.run = "r";
  fr.plan.count = 1;
  fr.published = true;
  auto d = DecideIncremental("items", "updated_at", fr.ToJson(), fr.ToJson());
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->start.cursor.is_null());
}

}  // namespace
}  // namespace ferry::engine

namespace ferry::engine {
namespace {

// What the coordinator lets the source forget follows what each stream's entry still needs.
TEST(ChangesNeededAfterTest, ACdcPositionOrABackfillsStartElseTheWholeLog) {
  EXPECT_EQ(ChangesNeededAfter(CdcProgress{"orders", L(700), L(500)}.ToJson(), kLsn), L(700));
  FullRefreshProgress loading = Load("r1", {0});
  loading.cdc_start = L(300);
  EXPECT_EQ(ChangesNeededAfter(loading.ToJson(), kLsn), L(300));
  EXPECT_EQ(ChangesNeededAfter(Load("r1", {0}).ToJson(), kLsn), std::nullopt);
  EXPECT_EQ(ChangesNeededAfter(nullptr, kLsn), std::nullopt);
  EXPECT_EQ(ChangesNeededAfter(Json{{"mode", "cdc"}, {"position", "0/1"}}, kLsn), std::nullopt);
  // A SQLite stream's sequence numbers read as such.
  EXPECT_EQ(
      ChangesNeededAfter(Json{{"mode", "cdc"}, {"position", 9}}, source::Position::Kind::kSequence),
      source::Position::Sequence(9));
}

}  // namespace
}  // namespace ferry::engine
