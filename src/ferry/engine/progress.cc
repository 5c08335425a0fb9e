#include "ferry/engine/progress.h"

#include <algorithm>
#include <ctime>

#include "ferry/base/uuid.h"

namespace ferry::engine {

void IndexSet::AddRange(int64_t lo, int64_t hi) {
  if (lo >= hi) return;
  std::vector<std::pair<int64_t, int64_t>> out;
  bool placed = false;
  for (const auto& r : ranges_) {
    if (r.second < lo) {
      out.push_back(r);
    } else if (hi < r.first) {
      if (!placed) {
        out.emplace_back(lo, hi);
        placed = true;
      }
      out.push_back(r);
    } else {
      lo = std::min(lo, r.first);
      hi = std::max(hi, r.second);
    }
  }
  if (!placed) out.emplace_back(lo, hi);
  std::sort(out.begin(), out.end());
  ranges_ = std::move(out);
}

void IndexSet::Add(int64_t i) { AddRange(i, i + 1); }

bool IndexSet::Contains(int64_t i) const {
  for (const auto& r : ranges_) {
    if (i >= r.first && i < r.second) return true;
  }
  return false;
}

void IndexSet::Merge(const IndexSet& o) {
  for (const auto& r : o.ranges_) AddRange(r.first, r.second);
}

int64_t IndexSet::Count() const {
  int64_t n = 0;
  for (const auto& r : ranges_) n += r.second - r.first;
  return n;
}

Json IndexSet::ToJson() const {
  Json a = Json::array();
  for (const auto& r : ranges_) a.push_back(Json::array({r.first, r.second}));
  return a;
}

Result<IndexSet> IndexSet::FromJson(const Json& j) {
  IndexSet s;
  if (!j.is_array()) return Status::Corruption("committed chunks are not a list");
  for (const auto& r : j) {
    if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() || !r[1].is_number_integer() ||
        r[0].get<int64_t>() < 0 || r[0].get<int64_t>() >= r[1].get<int64_t>()) {
      return Status::Corruption("committed chunks hold a bad range " + r.dump());
    }
    s.AddRange(r[0].get<int64_t>(), r[1].get<int64_t>());
  }
  return s;
}

Json FullRefreshProgress::ToJson() const {
  Json plan_j{{"count", plan.count}, {"step", plan.step}};
  plan_j["first"] = plan.first ? Json(*plan.first) : Json(nullptr);
  if (!plan.key.empty()) plan_j["key"] = plan.key;
  if (!plan.bounds.empty()) plan_j["bounds"] = plan.bounds;
  if (!plan.key_bounds.empty()) plan_j["key_bounds"] = plan.key_bounds;
  if (plan.rows > 0) plan_j["rows"] = plan.rows;
  Json j{{"mode", "full_refresh"},
         {"stream", stream},
         {"run", run},
         {"plan", plan_j},
         {"committed", committed.ToJson()},
         {"rows", rows},
         {"published", published}};
  if (cdc_start) j["cdc_start"] = cdc_start->ToJson();
  if (!table_id.empty()) j["table_id"] = table_id;
  if (!table_since.none()) j["table_since"] = table_since.ToJson();
  return j;
}

Result<FullRefreshProgress> FullRefreshProgress::FromJson(const Json& j, const std::string& origin,
                                                          Position::Kind kind) {
  auto bad = [&](const std::string& what) {
    return Status::Corruption(origin + " is not a valid full-refresh progress record: " + what);
  };
  if (!j.is_object()) return bad("not an object");
  if (j.value("mode", "") != "full_refresh") return bad("mode is not full_refresh");
  if (!j.contains("run") || !j["run"].is_string()) return bad("no run id");
  if (!j.contains("plan") || !j["plan"].is_object()) return bad("no chunk plan");
  FullRefreshProgress p;
  p.run = j["run"];
  p.stream = j.value("stream", "");
  const Json& plan = j["plan"];
  if (!plan.contains("count") || !plan["count"].is_number_integer() ||
      plan["count"].get<int64_t>() < 1) {
    return bad("plan.count must be a positive integer");
  }
  auto integer_or_absent = [&](const char* k) {
    return !plan.contains(k) || plan[k].is_null() || plan[k].is_number_integer();
  };
  if (!integer_or_absent("step") || !integer_or_absent("first") || !integer_or_absent("rows") ||
      (plan.contains("key") && !plan["key"].is_string())) {
    return bad("plan has a value of the wrong type");
  }
  p.plan.count = plan["count"];
  p.plan.step = plan.value("step", int64_t{0});
  p.plan.key = plan.value("key", std::string());
  p.plan.rows = plan.contains("rows") && !plan["rows"].is_null() ? plan["rows"].get<int64_t>() : 0;
  if (plan.contains("first") && !plan["first"].is_null())
    p.plan.first = plan["first"].get<int64_t>();
  if (plan.contains("bounds")) {
    const Json& b = plan["bounds"];
    if (!b.is_array() || b.empty() || static_cast<int64_t>(b.size()) + 1 != p.plan.count) {
      return bad("plan.bounds must list count - 1 boundaries");
    }
    for (const auto& v : b) {
      if (!v.is_number_integer()) return bad("plan.bounds holds a value that is not an integer");
      const auto x = v.get<int64_t>();
      if (!p.plan.bounds.empty() && x <= p.plan.bounds.back()) {
        return bad("plan.bounds are not increasing");
      }
      p.plan.bounds.push_back(x);
    }
  } else if (plan.contains("key_bounds")) {
    const Json& b = plan["key_bounds"];
    if (!b.is_array() || b.empty() || static_cast<int64_t>(b.size()) + 1 != p.plan.count) {
      return bad("plan.key_bounds must list count - 1 boundaries");
    }
    for (const auto& v : b) {
      const bool strings =
          v.is_array() && !v.empty() &&
          std::all_of(v.begin(), v.end(), [](const Json& x) { return x.is_string(); });
      if (!strings || (!p.plan.key_bounds.empty() && v.size() != p.plan.key_bounds.back().size())) {
        return bad("plan.key_bounds holds a boundary that is not a list of the key's values");
      }
      if (!p.plan.key_bounds.empty() && v == p.plan.key_bounds.back()) {
        return bad("plan.key_bounds repeats a boundary");
      }
      p.plan.key_bounds.push_back(v);
    }
  } else if (p.plan.count > 1 && (!p.plan.first || p.plan.step <= 0)) {
    return bad("plan lacks first/step");
  }
  auto committed = IndexSet::FromJson(j.value("committed", Json::array()));
  if (!committed.ok()) return bad(committed.status().message());
  p.committed = *committed;
  p.rows = j.value("rows", int64_t{0});
  p.published = j.value("published", false);
  if (j.contains("cdc_start")) {
    auto start = Position::FromJson(j["cdc_start"], kind, "cdc_start");
    if (!start.ok()) return bad(start.status().message());
    p.cdc_start = *start;
  }
  if (j.contains("table_id")) {
    if (!j["table_id"].is_string()) return bad("table_id is not a string");
    p.table_id = j["table_id"].get<std::string>();
  }
  if (j.contains("table_since")) {
    auto since = Position::FromJson(j["table_since"], kind, "table_since");
    if (!since.ok()) return bad(since.status().message());
    p.table_since = *since;
  }
  return p;
}

Result<Decision> DecideFullRefresh(const Json& state, const Json& marker, Position::Kind kind) {
  Decision d;
  std::optional<FullRefreshProgress> st, mk;
  if (!state.is_null()) {
    FERRY_ASSIGN_OR_RETURN(st,
                           FullRefreshProgress::FromJson(state, "the state file's entry", kind));
  }
  if (!marker.is_null()) {
    FERRY_ASSIGN_OR_RETURN(mk, FullRefreshProgress::FromJson(marker, "the table's marker", kind));
  }
  // A state whose load was published is finished: a new sync starts a new load.
  if (st && st->published) {
    d.explanation = "the last load (run " + st->run + ") is complete: a new full refresh starts";
    return d;
  }
  // Chunks the state counts as committed must be in the table, under the same run's marker;
  // without it the table lost them (dropped or replaced): resuming would skip them for good.
  if (st && st->committed.Count() > 0 && (!mk || mk->run != st->run)) {
    d.explanation = "the state says run " + st->run + " has " +
                    std::to_string(st->committed.Count()) +
                    " chunks committed, but the table holds no marker of that run (it was "
                    "dropped or replaced): a new full refresh starts";
    return d;
  }
  if (st) {
    FullRefreshProgress merged = *st;
    if (mk && mk->run == st->run) {
      if (!(mk->committed == st->committed) || mk->published) {
        IndexSet before = merged.committed;
        merged.committed.Merge(mk->committed);
        d.state_behind = !(merged.committed == before) || mk->published;
        merged.rows = std::max(merged.rows, mk->rows);
      }
      merged.published = mk->published;
    }
    d.progress = merged;
    if (merged.published) {
      d.action = Action::kAlreadyPublished;
      d.explanation = "run " + merged.run +
                      " was published in the table but the state file missed it: state repaired "
                      "from the marker, nothing re-read";
      return d;
    }
    d.action = Action::kResume;
    d.explanation = "resuming run " + merged.run + ": " + std::to_string(merged.committed.Count()) +
                    " of " + std::to_string(merged.plan.count) + " chunks already committed" +
                    (d.state_behind ? " (the marker was ahead of the state; state repaired)" : "");
    return d;
  }
  // No state for this stream.
  if (mk && !mk->published) {
    d.action = Action::kResume;
    d.progress = *mk;
    d.state_behind = true;
    d.explanation = "no state, but the table holds an unfinished load (run " + mk->run +
                    "): resuming it from the marker, " + std::to_string(mk->committed.Count()) +
                    " of " + std::to_string(mk->plan.count) + " chunks already committed";
    return d;
  }
  d.explanation = mk ? "no state; the table's last load is complete: a new full refresh starts"
                     : "no state and no marker: a new full refresh starts";
  return d;
}

Json IncrementalProgress::ToJson() const {
  Json j{{"mode", "incremental"}, {"stream", stream}, {"cursor_column", cursor_column},
         {"cursor", cursor},      {"window", window}, {"from", from}};
  if (ties) j["ties"] = ties->ToJson();
  if (landed) j["landed"] = true;
  return j;
}

Result<IncrementalProgress> IncrementalProgress::FromJson(const Json& j,
                                                          const std::string& origin) {
  auto cursor_value = [](const Json& v) { return v.is_null() || v.is_number() || v.is_string(); };
  if (!j.is_object() || j.value("mode", "") != "incremental" || !j.contains("cursor_column") ||
      !j["cursor_column"].is_string() || !j.contains("cursor") || !cursor_value(j["cursor"]) ||
      (j.contains("from") && !cursor_value(j["from"]))) {
    return Status::Corruption(origin + " is not a valid incremental progress record");
  }
  IncrementalProgress p;
  p.stream = j.value("stream", "");
  p.cursor_column = j["cursor_column"];
  p.cursor = j["cursor"];
  if (j.contains("ties") && !j["ties"].is_null()) {
    FERRY_ASSIGN_OR_RETURN(CursorTies t, CursorTies::FromJson(j["ties"], origin));
    p.ties = std::move(t);
  }
  p.window = j.value("window", "");
  p.from = j.contains("from") ? j["from"] : Json(nullptr);
  p.landed = j.value("landed", false);
  return p;
}

Result<IncrementalDecision> DecideIncremental(const std::string& stream, const std::string& cursor,
                                              const Json& state, const Json& marker) {
  IncrementalDecision d;
  d.start.stream = stream;
  d.start.cursor_column = cursor;
  // A state or marker left by a full refresh (or nothing) starts the cursor from the beginning.
  bool state_incremental = state.is_object() && state.value("mode", "") == "incremental";
  bool marker_incremental = marker.is_object() && marker.value("mode", "") == "incremental";
  if (state_incremental) {
    FERRY_ASSIGN_OR_RETURN(IncrementalProgress st,
                           IncrementalProgress::FromJson(state, "the state file's entry"));
    if (st.cursor_column != cursor) {
      return Status::InvalidArgument(
          "stream " + stream + ": the cursor was '" + st.cursor_column + "' and is now '" + cursor +
          "'; values of two columns cannot be compared. Put the old cursor back, or "
          "run a full_refresh of the stream to start over");
    }
    d.start.cursor = st.cursor;
    d.start.ties = st.ties;
    d.start.landed = st.landed;
    if (st.landed && marker.is_null()) {
      return Status::Corruption(
          "the state file says the table holds the rows up to " + st.cursor_column + " = " +
          st.cursor.dump() +
          ", but the table has no marker of this pipeline: it was dropped or emptied, or the "
          "destination is not the one the state was written for, and the rows it held are gone. "
          "To load it again, remove the stream's entry from the state file (`ferry state` shows "
          "it) and sync: every row is read again");
    }
  }
  if (marker_incremental) {
    FERRY_ASSIGN_OR_RETURN(IncrementalProgress mk,
                           IncrementalProgress::FromJson(marker, "the table's marker"));
    if (mk.cursor_column == cursor &&
        mk.window == IncrementalProgress::WindowId(stream, d.start.cursor, d.start.ties)) {
      // The window starting at the state's cursor committed; the state write was lost.
      d.start.cursor = mk.cursor;
      d.start.ties = mk.ties;
      d.start.window = mk.window;
      d.start.from = mk.from;
      d.start.landed = true;
      d.state_behind = true;
      d.explanation = "the window from " + mk.from.dump() + " to " + mk.cursor.dump() +
                      " is already in the table: state repaired from the marker, nothing re-read";
      return d;
    }
  }
  d.explanation = d.start.cursor.is_null()
                      ? "no cursor yet: reading every row up to the current maximum"
                      : "reading rows from " + d.start.cursor.dump() +
                            " on (the rows at it not yet committed, then those above it)";
  return d;
}

Json CdcProgress::ToJson() const {
  Json j{{"mode", "cdc"},
         {"stream", stream},
         {"position", position.ToJson()},
         {"from", from.ToJson()}};
  if (landed) j["landed"] = true;
  if (!table_id.empty()) j["table_id"] = table_id;
  if (table_since > position) j["table_since"] = table_since.ToJson();
  return j;
}

Result<std::optional<Position>> ProvenPosition(const Json& j, const std::string& origin,
                                               Position::Kind kind) {
  if (!j.is_object()) return std::optional<Position>();
  if (j.value("mode", "") == "cdc") {
    if (!j.contains("position")) {
      return Status::Corruption(origin + " is not a valid cdc progress record");
    }
    auto p = Position::FromJson(j["position"], kind, "position");
    if (!p.ok()) {
      return Status::Corruption(origin +
                                " is not a valid cdc progress record: " + p.status().message());
    }
    return std::optional<Position>(*p);
  }
  if (j.value("mode", "") == "full_refresh" && j.value("published", false) &&
      j.contains("cdc_start")) {
    FERRY_ASSIGN_OR_RETURN(FullRefreshProgress p, FullRefreshProgress::FromJson(j, origin, kind));
    return p.cdc_start;
  }
  return std::optional<Position>();
}

std::optional<Position> ChangesNeededAfter(const Json& record, Position::Kind kind) {
  if (!record.is_object()) return std::nullopt;
  const char* field = record.value("mode", "") == "cdc" ? "position" : "cdc_start";
  if (!record.contains(field)) return std::nullopt;
  auto at = Position::FromJson(record[field], kind, field);
  if (!at.ok()) return std::nullopt;
  return *at;
}

namespace {
// Where a record's rows of its table were read (none: it does not say).
Position TableSinceOf(const Json& j, Position::Kind kind) {
  if (!j.is_object() || !j.contains("table_since")) return Position();
  auto p = Position::FromJson(j["table_since"], kind, "table_since");
  return p.ok() ? *p : Position();
}

// The table a record's changes are of (empty: it does not say).
Result<std::string> TableIdOf(const Json& j, const std::string& origin) {
  if (!j.is_object() || !j.contains("table_id")) return std::string();
  if (!j["table_id"].is_string()) {
    return Status::Corruption(origin + " has a table_id that is not a string");
  }
  return j["table_id"].get<std::string>();
}
}  // namespace

Result<CdcDecision> DecideCdc(const Json& state, const Json& marker, bool backfilled,
                              Position::Kind kind, const std::string& table_id) {
  CdcDecision d;
  FERRY_ASSIGN_OR_RETURN(std::optional<Position> ps,
                         ProvenPosition(state, "the state file's entry", kind));
  FERRY_ASSIGN_OR_RETURN(std::optional<Position> pm,
                         ProvenPosition(marker, "the table's marker", kind));
  FERRY_ASSIGN_OR_RETURN(std::string ts, TableIdOf(state, "the state file's entry"));
  FERRY_ASSIGN_OR_RETURN(std::string tm, TableIdOf(marker, "the table's marker"));
  if (!ps && pm && !tm.empty() && !table_id.empty() && tm != table_id) {
    // The table holds another table's rows and nothing says to go on with them: start over.
    d.backfill = true;
    FERRY_ASSIGN_OR_RETURN(d.full, DecideFullRefresh(Json(nullptr), Json(nullptr), kind));
    d.explanation =
        "backfill: the table holds the rows of a source table dropped since, or of partitions "
        "that changed since (table " +
        tm + ", the source's is " + table_id + " now): a new load replaces them";
    return d;
  }
  const bool landed = state.is_object() && state.value("landed", false);
  if ((backfilled || landed) && ps && marker.is_null()) {
    return Status::Corruption(
        "the state file says the table holds the changes up to position " + ps->ToString() +
        ", but the table has no marker of this pipeline: it was dropped or emptied, or the "
        "destination is not the one the state was written for, and the rows it held are gone. "
        "To load it again, remove the stream's entry from the state file (`ferry state` shows "
        "it) and sync: " +
        std::string(backfilled ? "the table is backfilled anew"
                               : "the stream starts again with the changes from then on "
                                 "(cdc_only: the rows it had are not read again; use mode "
                                 "cdc to backfill them)"));
  }
  if (ps || pm) {
    const bool marker_ahead = pm && (!ps || *pm > *ps);
    d.position = marker_ahead ? *pm : *ps;
    d.state_behind = marker_ahead;
    const Json& proof = marker_ahead || ts.empty() ? marker : state;
    d.table_id = marker_ahead || ts.empty() ? tm : ts;
    if (d.table_id.empty()) d.table_id = ts;
    d.table_since = TableSinceOf(proof, kind);
    d.explanation = d.state_behind
                        ? "the table already holds changes up to " + pm->ToString() +
                              " (the state had " + (ps ? ps->ToString() : std::string("none")) +
                              "): state repaired from the marker, those changes are not read again"
                        : "applying changes after position " + d.position.ToString();
    return d;
  }
  // No change position yet: the backfill (a full refresh) is new or in flight.
  d.backfill = true;
  FERRY_ASSIGN_OR_RETURN(d.full, DecideFullRefresh(state, marker, kind));
  if (d.full.action == Action::kAlreadyPublished) {
    if (!d.full.progress.cdc_start) {
      return Status::Corruption("the backfill record of stream " + d.full.progress.stream +
                                " has no cdc_start position");
    }
    d.backfill = false;
    d.position = *d.full.progress.cdc_start;
    d.table_id = d.full.progress.table_id;
    d.table_since = d.full.progress.table_since;
    d.state_behind = true;
    d.explanation =
        "the backfill was published but the state missed it: state repaired, "
        "applying changes after position " +
        d.position.ToString();
    return d;
  }
  if (d.full.action == Action::kResume && !d.full.progress.cdc_start) {
    return Status::Corruption("the backfill record of stream " + d.full.progress.stream +
                              " has no cdc_start position; move the state away to start over");
  }
  d.explanation = "backfill: " + d.full.explanation;
  return d;
}

std::string NewRunId() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return std::string(buf) + "-" + NewUuid().substr(0, 6);
}

Json PartOfMarker(const Json& table_marker, const std::string& source_name) {
  if (source_name.empty()) return table_marker;
  if (!table_marker.is_object() || !table_marker.contains("sources") ||
      !table_marker["sources"].is_object()) {
    return Json(nullptr);
  }
  return table_marker["sources"].value(source_name, Json(nullptr));
}

namespace {
std::optional<FullRefreshProgress> LoadOf(const Json& marker, Position::Kind kind) {
  if (!marker.is_object()) return std::nullopt;
  auto p = FullRefreshProgress::FromJson(marker, "marker", kind);
  if (!p.ok()) return std::nullopt;
  return *p;
}
}  // namespace

bool ChunkLanded(const Json& marker, const std::string& run, int64_t chunk, Position::Kind kind) {
  auto m = LoadOf(marker, kind);
  return m && m->run == run && m->committed.Contains(chunk);
}

bool LoadPublished(const Json& marker, const std::string& run, Position::Kind kind) {
  auto m = LoadOf(marker, kind);
  return m && m->run == run && m->published;
}

bool WindowLanded(const Json& marker, const std::string& window) {
  return marker.is_object() && marker.value("mode", "") == "incremental" &&
         marker.value("window", "") == window;
}

bool ChangesLanded(const Json& marker, Position position, Position::Kind kind) {
  if (!marker.is_object() || marker.value("mode", "") != "cdc") return false;
  const auto it = marker.find("position");
  if (it == marker.end()) return false;
  auto at = Position::FromJson(*it, kind, "position");
  return at.ok() && *at >= position;
}

}  // namespace ferry::engine
