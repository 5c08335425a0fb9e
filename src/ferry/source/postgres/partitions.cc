#include "ferry/source/postgres/partitions.h"

#include <algorithm>
#include <charconv>

#include "ferry/clients/postgres/pg_conn.h"

namespace ferry::source::pg {

// The PostgreSQL client's names (PgConnection, the COPY codec, the type map) are this
// namespace's too.
using namespace ferry::pg;
namespace {

Result<uint32_t> ParseOid(std::string_view text, std::string_view whole) {
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v == 0) {
    return Status::Corruption("table id '" + std::string(whole) +
                              "' (from the state file or the table's marker) is not a PostgreSQL "
                              "relation OID with its partitions' OIDs");
  }
  return v;
}

// "schema.table" of each relation in `oids`, "relation <oid> (dropped)" for one that is gone.
Result<std::string> Names(PgConnection* conn, const std::vector<uint32_t>& oids) {
  std::string list;
  for (uint32_t oid : oids) list += (list.empty() ? "" : ",") + std::to_string(oid);
  FERRY_ASSIGN_OR_RETURN(
      auto r, conn->Query("SELECT o.oid::int8, n.nspname, c.relname"
                          "  FROM unnest($1::oid[]) WITH ORDINALITY o(oid, i)"
                          "  LEFT JOIN pg_class c ON c.oid = o.oid"
                          "  LEFT JOIN pg_namespace n ON n.oid = c.relnamespace ORDER BY o.i",
                          {"{" + list + "}"}));
  std::string out;
  for (int i = 0; i < r.rows(); ++i) {
    out += out.empty() ? "" : ", ";
    out += r.IsNull(i, 1) ? "relation " + r.Text(i, 0) + " (dropped)"
                          : r.Text(i, 1) + "." + r.Text(i, 2);
  }
  return out;
}

// Whether partition `leaf` of `root` holds a row written before it joined `root`: a row whose
// transaction is older than the newest catalog row of the leaf and of its ancestors below `root`
// (ATTACH PARTITION rewrites the attached table's pg_class row), or of that very transaction
// but an earlier command (a table filled and attached in one transaction).
Result<bool> HoldsOlderRows(PgConnection* conn, uint32_t root, uint32_t leaf) {
  FERRY_ASSIGN_OR_RETURN(
      auto joined, conn->Query("SELECT c.xmin::text::int8, c.cmin::text::int8, n.nspname, l.relname"
                               "  FROM pg_partition_ancestors($1::oid::regclass) a"
                               "  JOIN pg_class c ON c.oid = a.relid"
                               "  JOIN pg_class l ON l.oid = $1::oid"
                               "  JOIN pg_namespace n ON n.oid = l.relnamespace"
                               " WHERE a.relid::oid <> $2::oid"
                               " ORDER BY age(c.xmin), c.cmin::text::int8 DESC LIMIT 1",
                               {std::to_string(leaf), std::to_string(root)}));
  if (joined.rows() == 0) return false;  // gone again: the next look sees it left
  const std::string leaf_name = QuoteIdent(joined.Text(0, 2)) + "." + QuoteIdent(joined.Text(0, 3));
  FERRY_ASSIGN_OR_RETURN(
      auto older, conn->Query("SELECT EXISTS (SELECT 1 FROM ONLY " + leaf_name +
                                  " r WHERE age(r.xmin) > age($1::text::xid)"
                                  " OR (r.xmin = $1::text::xid AND r.cmin::text::int8 < $2::int8))",
                              {joined.Text(0, 0), joined.Text(0, 1)}));
  return older.Bool(0, 0);
}

}  // namespace

std::string TableIdentity::ToString() const {
  std::string out = std::to_string(relid);
  if (!partitioned) return out;
  out += '/';
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(leaves[i]);
  }
  return out;
}

Result<TableIdentity> TableIdentity::Parse(std::string_view text) {
  TableIdentity id;
  const size_t slash = text.find('/');
  FERRY_ASSIGN_OR_RETURN(id.relid, ParseOid(text.substr(0, slash), text));
  if (slash == std::string_view::npos) return id;
  id.partitioned = true;
  std::string_view rest = text.substr(slash + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    FERRY_ASSIGN_OR_RETURN(uint32_t leaf, ParseOid(rest.substr(0, comma), text));
    if (!id.leaves.empty() && leaf <= id.leaves.back()) {
      return Status::Corruption("table id '" + std::string(text) +
                                "' (from the state file or the table's marker) lists its "
                                "partitions out of order");
    }
    id.leaves.push_back(leaf);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) return ParseOid(rest, text).status();
  }
  return id;
}

Result<std::vector<uint32_t>> LeafPartitions(PgConnection* conn, uint32_t root) {
  FERRY_ASSIGN_OR_RETURN(auto r,
                         conn->Query("SELECT relid::oid::int8 FROM pg_partition_tree($1::oid)"
                                     " WHERE isleaf ORDER BY 1",
                                     {std::to_string(root)}));
  std::vector<uint32_t> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(static_cast<uint32_t>(r.Int64(i, 0)));
  return out;
}

Result<std::string> PartitionsDiverge(PgConnection* conn, const std::string& display,
                                      const TableIdentity& held, const TableIdentity& now) {
  if (!held.partitioned || !now.partitioned || held.relid != now.relid) return std::string();
  std::vector<uint32_t> left;
  std::vector<uint32_t> joined;
  std::set_difference(held.leaves.begin(), held.leaves.end(), now.leaves.begin(), now.leaves.end(),
                      std::back_inserter(left));
  std::set_difference(now.leaves.begin(), now.leaves.end(), held.leaves.begin(), held.leaves.end(),
                      std::back_inserter(joined));
  std::vector<uint32_t> with_rows;
  for (uint32_t leaf : joined) {
    FERRY_ASSIGN_OR_RETURN(bool older, HoldsOlderRows(conn, now.relid, leaf));
    if (older) with_rows.push_back(leaf);
  }
  if (left.empty() && with_rows.empty()) return std::string();
  std::string out = "the partitions of " + display + " changed on the source: ";
  if (!left.empty()) {
    FERRY_ASSIGN_OR_RETURN(std::string names, Names(conn, left));
    out += names + (left.size() == 1 ? " is" : " are") +
           " no longer a partition of it (detached or dropped: the rows the destination holds of " +
           (left.size() == 1 ? "it" : "them") + " stay, as the change log has no deletes of them)";
  }
  if (!with_rows.empty()) {
    FERRY_ASSIGN_OR_RETURN(std::string names, Names(conn, with_rows));
    out += std::string(left.empty() ? "" : "; ") + names +
           (with_rows.size() == 1 ? " was" : " were") + " attached holding rows written before " +
           (with_rows.size() == 1 ? "it" : "they") +
           " joined (the change log does not carry them, so the destination lacks them)";
  }
  return out;
}

}  // namespace ferry::source::pg
