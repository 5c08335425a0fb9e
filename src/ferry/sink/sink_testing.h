// Test helpers shared by the destinations' tests (GoogleTest): fields and rows of the usual test
// schema, and the schema-evolution rule (types/type_change_cases.h) run through a Sink.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "ferry/sink/sink.h"
#include "ferry/types/type_change_cases.h"

namespace ferry::testing {

inline Field F(int32_t id, std::string name, DataType type, bool required = false) {
  Field f;
  f.id = id;
  f.name = std::move(name);
  f.type = std::move(type);
  f.required = required;
  return f;
}

// Rows (id long, name string) of `schema`; the name "NULL" is a NULL.
inline Batch Rows(const std::shared_ptr<const Schema>& schema,
                  const std::vector<std::pair<int64_t, std::string>>& rows) {
  Batch b(schema);
  for (const auto& [id, name] : rows) {
    b.column(0).AppendInt64(id);
    if (name == "NULL") {
      b.column(1).AppendNull();
    } else {
      b.column(1).AppendBytes(name);
    }
  }
  return b;
}

// Every case of the rule, each in a table of its own ("<prefix>1", ...): a table of (id long key,
// c <the case's table type>) that holds a marker is opened again for c of the source type, not
// replacing it. A refused change is kInvalidArgument naming the fix (a full refresh); any other
// opens, and after a commit the table reads back with c of the source's type.
inline void ExpectColumnTypesEvolveByTheRule(sink::Sink& sink, const std::string& prefix) {
  auto schema = [](const DataType& t) {
    Schema s;
    s.fields = {F(1, "id", DataType::Int64(), true), F(2, "c", t)};
    s.identifier_field_ids = {1};
    return s;
  };
  auto at_least = [](int64_t n) {
    return [n](const nlohmann::json& m) { return m.is_number() && m.get<int64_t>() >= n; };
  };
  int n = 0;
  for (const auto& c : TypeChangeCases()) {
    const std::string stream = prefix + std::to_string(++n);
    const std::string what = c.table.ToIceberg() + " <- " + c.source.ToIceberg();
    {
      auto s = sink.OpenStream(stream, schema(c.table), false);
      ASSERT_TRUE(s.ok()) << what << ": " << s.status().ToString();
      ASSERT_TRUE((*s)->Commit("", nlohmann::json(1), {}, at_least(1)).ok()) << what;
    }
    auto s = sink.OpenStream(stream, schema(c.source), false);
    if (c.expected == TypeChange::kRefused) {
      ASSERT_FALSE(s.ok()) << what;
      EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << what;
      EXPECT_NE(s.status().message().find("full refresh"), std::string::npos) << what;
      continue;
    }
    ASSERT_TRUE(s.ok()) << what << ": " << s.status().ToString();
    ASSERT_TRUE((*s)->Commit("", nlohmann::json(2), {}, at_least(2)).ok()) << what;
    auto reader = sink.OpenReader(stream);
    ASSERT_TRUE(reader.ok() && *reader) << what;
    EXPECT_EQ(CompareTypes((*reader)->schema()->fields[1].type, c.source), TypeChange::kSame)
        << what;
  }
}

}  // namespace ferry::testing
