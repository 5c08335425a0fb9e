#include "ferry/clients/postgres/pg_types.h"

#include <gtest/gtest.h>

namespace ferry::pg {
namespace {

PgBaseType T(uint32_t oid, int32_t typmod = -1, char typtype = 'b', char cat = 'N') {
  PgBaseType t;
  t.oid = oid;
  t.typmod = typmod;
  t.typtype = typtype;
  t.typcategory = cat;
  t.display = "type" + std::to_string(oid);
  return t;
}

int32_t NumericMod(int p, int s) { return ((p << 16) | (s & 0x7FF)) + 4; }

TEST(PgTypesTest, MapsBuiltInTypes) {
  EXPECT_EQ(MapPgType(T(21), "c").type.ToIceberg(), "int");
  EXPECT_EQ(MapPgType(T(23), "c").type.ToIceberg(), "int");
  EXPECT_EQ(MapPgType(T(20), "c").type.ToIceberg(), "long");
  EXPECT_EQ(MapPgType(T(700), "c").type.ToIceberg(), "float");
  EXPECT_EQ(MapPgType(T(701), "c").type.ToIceberg(), "double");
  EXPECT_EQ(MapPgType(T(16), "c").type.ToIceberg(), "boolean");
  EXPECT_EQ(MapPgType(T(17), "c").type.ToIceberg(), "binary");
  EXPECT_EQ(MapPgType(T(25), "c").type.ToIceberg(), "string");
  EXPECT_EQ(MapPgType(T(1042), "c").type.ToIceberg(), "string");
  EXPECT_EQ(MapPgType(T(1043), "c").type.ToIceberg(), "string");
  EXPECT_EQ(MapPgType(T(1082), "c").type.ToIceberg(), "date");
  EXPECT_EQ(MapPgType(T(1083), "c").type.ToIceberg(), "time");
  EXPECT_EQ(MapPgType(T(1266), "c").wire, PgWire::kTimeTz);
  EXPECT_EQ(MapPgType(T(1114), "c").type.ToIceberg(), "timestamp");
  EXPECT_EQ(MapPgType(T(1184), "c").type.ToIceberg(), "timestamptz");
  EXPECT_EQ(MapPgType(T(1186), "c").wire, PgWire::kInterval);
  EXPECT_EQ(MapPgType(T(2950), "c").type.ToIceberg(), "uuid");
  EXPECT_EQ(MapPgType(T(114), "c").wire, PgWire::kText);
  EXPECT_EQ(MapPgType(T(3802), "c").wire, PgWire::kJsonb);
  EXPECT_EQ(MapPgType(T(99999, -1, 'e', 'E'), "c").type.ToIceberg(), "string");
}

TEST(PgTypesTest, NumericPrecisionAndScale) {
  EXPECT_EQ(MapPgType(T(1700, NumericMod(12, 2)), "c").type.ToIceberg(), "decimal(12,2)");
  EXPECT_EQ(MapPgType(T(1700, NumericMod(38, 38)), "c").type.ToIceberg(), "decimal(38,38)");
  EXPECT_EQ(MapPgType(T(1700, NumericMod(5, -2)), "c").type.ToIceberg(), "decimal(7,0)");
  EXPECT_EQ(MapPgType(T(1700, NumericMod(2, 5)), "c").type.ToIceberg(), "decimal(5,5)");
  EXPECT_EQ(MapPgType(T(1700, NumericMod(39, 0)), "c").wire, PgWire::kNumericText);
  EXPECT_EQ(MapPgType(T(1700), "c").wire, PgWire::kNumericText);
  EXPECT_EQ(MapPgType(T(1700), "c").type.ToIceberg(), "string");
}

TEST(PgTypesTest, UnmappableTypesNameColumnAndFix) {
  PgBaseType arr = T(1007, -1, 'b', 'A');
  arr.display = "integer[]";
  auto m = MapPgType(arr, "tags");
  EXPECT_NE(m.error.find("tags"), std::string::npos);
  EXPECT_NE(m.error.find("integer[]"), std::string::npos);
  PgBaseType inet = T(869);
  inet.display = "inet";
  m = MapPgType(inet, "addr");
  EXPECT_EQ(m.error,
            "ferry cannot map type inet of column addr; cast it in a view (e.g. col::text) "
            "or exclude the table");
}

TEST(PgTypesTest, CursorTypesCarryIntegersAsNumbersAndTheRestAsExactText) {
  using K = CursorSupport::Kind;
  for (uint32_t oid : {21u, 23u, 20u, 26u}) {
    EXPECT_EQ(ClassifyCursor(T(oid)).kind, K::kInteger) << oid;
  }
  EXPECT_EQ(ClassifyCursor(T(20)).cast, "pg_catalog.int8");
  EXPECT_TRUE(ClassifyCursor(T(20)).candidate);
  EXPECT_FALSE(ClassifyCursor(T(26)).candidate);  // oid: possible, not suggested
  for (uint32_t oid :
       {1700u, 700u, 701u, 1082u, 1083u, 1114u, 1184u, 25u, 1043u, 1042u, 19u, 2950u}) {
    EXPECT_EQ(ClassifyCursor(T(oid)).kind, K::kText) << oid;
  }
  EXPECT_EQ(ClassifyCursor(T(1184)).cast, "pg_catalog.timestamptz");
  EXPECT_TRUE(ClassifyCursor(T(1184)).candidate);
  EXPECT_TRUE(ClassifyCursor(T(1700, NumericMod(12, 2))).candidate);
  EXPECT_TRUE(ClassifyCursor(T(1700)).nan_possible);
  EXPECT_FALSE(ClassifyCursor(T(25)).candidate);  // text: possible, not suggested
  EXPECT_EQ(ClassifyCursor(T(2950)).cast, "pg_catalog.uuid");
}

TEST(PgTypesTest, CursorRefusesTypesWithoutAUsefulTotalOrderOrExactText) {
  using K = CursorSupport::Kind;
  EXPECT_EQ(ClassifyCursor(T(114)).why, "json has no ordering");
  for (uint32_t oid : {114u, 3802u, 17u, 16u, 1186u, 1266u, 869u, 790u}) {
    CursorSupport s = ClassifyCursor(T(oid));
    EXPECT_EQ(s.kind, K::kRefused) << oid;
    EXPECT_FALSE(s.why.empty()) << oid;
    EXPECT_FALSE(s.candidate) << oid;
  }
  EXPECT_EQ(ClassifyCursor(T(23, -1, 'b', 'A')).kind, K::kRefused);     // int4[]
  EXPECT_EQ(ClassifyCursor(T(90000, -1, 'e', 'E')).kind, K::kRefused);  // an enum
  EXPECT_EQ(ClassifyCursor(T(3904, -1, 'r', 'R')).kind, K::kRefused);   // int4range
}

TEST(PgTypesTest, ArraysMapToListsOfTheirElement) {
  PgBaseType arr = T(1231, -1, 'b', 'A');  // numeric(10,2)[]
  arr.display = "numeric(10,2)[]";
  arr.element = std::make_shared<PgBaseType>(T(1700, NumericMod(10, 2)));
  auto m = MapPgType(arr, "prices");
  ASSERT_TRUE(m.error.empty()) << m.error;
  EXPECT_EQ(m.wire, PgArrayOf(PgWire::kNumericDecimal));
  EXPECT_TRUE(IsPgArray(m.wire));
  EXPECT_EQ(PgElementOf(m.wire), PgWire::kNumericDecimal);
  ASSERT_TRUE(m.type.is_list());
  EXPECT_EQ(m.type.list().type.ToIceberg(), "decimal(10,2)");
  EXPECT_FALSE(m.type.list().required);

  PgBaseType labels = T(90001, -1, 'b', 'A');  // an enum's array
  labels.element = std::make_shared<PgBaseType>(T(90000, -1, 'e', 'E'));
  m = MapPgType(labels, "moods");
  ASSERT_TRUE(m.error.empty()) << m.error;
  EXPECT_EQ(m.wire, PgArrayOf(PgWire::kText));
  EXPECT_EQ(m.type.ToIceberg(), "list<string>");

  PgBaseType inets = T(1041, -1, 'b', 'A');
  inets.display = "inet[]";
  inets.element = std::make_shared<PgBaseType>(T(869));
  m = MapPgType(inets, "addrs");
  EXPECT_NE(m.error.find("addrs"), std::string::npos);
  EXPECT_NE(m.error.find("inet[]"), std::string::npos);
  EXPECT_EQ(ClassifyCursor(arr).kind, CursorSupport::Kind::kRefused);
}

}  // namespace
}  // namespace ferry::pg
