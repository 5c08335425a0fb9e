#include "ferry/sink/sink_util.h"

#include <cstdio>

namespace ferry::sink {

uint64_t Fnv1a64(std::string_view s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string Hex16(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string LoadId(const std::vector<std::string>& parts) {
  uint64_t h = kLoadIdOffset;
  for (const auto& p : parts) h = Fnv1a64(std::string_view("\0", 1), Fnv1a64(p, h));
  return Hex16(h);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool IsKey(const Schema& s, int32_t id) {
  for (int32_t k : s.identifier_field_ids) {
    if (k == id) return true;
  }
  return false;
}

std::vector<std::string> KeyNames(const Schema& s) {
  std::vector<std::string> out;
  for (int32_t id : s.identifier_field_ids) {
    if (const Field* f = s.FindById(id)) out.push_back(f->name);
  }
  return out;
}

std::vector<size_t> KeyPositions(const Schema& s) {
  std::vector<size_t> out;
  for (int32_t id : s.identifier_field_ids) {
    for (size_t i = 0; i < s.fields.size(); ++i) {
      if (s.fields[i].id == id) out.push_back(i);
    }
  }
  return out;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return "(" + out + ")";
}

void SetKeyInOrder(std::vector<std::pair<int, int32_t>> key, Schema* schema) {
  std::sort(key.begin(), key.end());
  for (auto [pos, id] : key) schema->identifier_field_ids.push_back(id);
}

Status CheckSameKey(const std::vector<std::string>& table_key, const Schema& source,
                    const std::string& table) {
  const std::vector<std::string> want_key = KeyNames(source);
  if (want_key.empty() || table_key == want_key) return Status::OK();
  std::string have;
  for (const auto& k : table_key) have += (have.empty() ? "" : ", ") + k;
  std::string want;
  for (const auto& k : want_key) want += (want.empty() ? "" : ", ") + k;
  return Status::InvalidArgument(
      "table " + table + " has primary key (" + (have.empty() ? "none" : have) +
      ") but the stream's key is (" + want +
      "); changes are applied by key, so the two must match: give the table that primary "
      "key, or run a full refresh of the stream, which recreates it");
}

Status RequireKeyToUpsert(bool has_key, const std::string& table) {
  if (has_key) return Status::OK();
  return Status::InvalidArgument(
      "table " + table +
      " has no primary key, so rows cannot be upserted; declare a key on the source table (NOT "
      "NULL columns) or set the stream's primary_key");
}

std::string AlterTableSql(const std::string& table, const std::vector<std::string>& alters) {
  std::string sql = "ALTER TABLE " + table;
  for (size_t i = 0; i < alters.size(); ++i) sql += (i ? ", " : " ") + alters[i];
  return sql;
}

Result<std::string> DumpJson(const nlohmann::json& j, std::string_view what) {
  try {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string(what) + " cannot be written as JSON: " + e.what());
  }
}

nlohmann::json ColumnsJson(const Schema& s) {
  nlohmann::json arr = nlohmann::json::array();
  for (const Field& f : s.fields) {
    nlohmann::json c = {{"name", f.name},
                        {"type", f.type.ToIceberg()},
                        {"required", f.required},
                        {"key", IsKey(s, f.id)}};
    if (f.type.is_list()) c["element_required"] = f.type.list().required;
    arr.push_back(std::move(c));
  }
  return arr;
}

Result<Field> FieldFromColumnsEntry(const nlohmann::json& c, int32_t id) {
  if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("type") ||
      !c["type"].is_string()) {
    return Status::InvalidArgument(c.dump());
  }
  Field f;
  f.id = id;
  f.name = c["name"].get<std::string>();
  f.required = c.value("required", false);
  const std::string type = c["type"].get<std::string>();
  if (type.rfind("list<", 0) == 0 && type.size() > 6 && type.back() == '>') {
    auto element = DataType::FromIceberg(type.substr(5, type.size() - 6));
    if (!element.ok()) return Status::NotSupported(type);
    f.type = DataType::List(*element, c.value("element_required", false));
  } else {
    auto t = DataType::FromIceberg(type);
    if (!t.ok()) return Status::NotSupported(type);
    f.type = *t;
  }
  return f;
}

Result<Schema> SchemaFromColumnsJson(const nlohmann::json& arr) {
  auto bad = [](const std::string& why) { return Status::Corruption(why); };
  Schema s;
  int32_t id = 0;
  for (const nlohmann::json& c : arr) {
    auto f = FieldFromColumnsEntry(c, ++id);
    if (!f.ok()) {
      return bad(f.status().code() == StatusCode::kNotSupported
                     ? "name an unknown type '" + f.status().message() + "'"
                     : "hold an entry without a name and a type: " + f.status().message());
    }
    if (c.value("key", false)) s.identifier_field_ids.push_back(f->id);
    s.fields.push_back(std::move(*f));
  }
  if (s.fields.empty()) return bad("are empty");
  for (Field& f : s.fields) {
    if (f.type.is_list()) f.type = f.type.WithElementId(++id);
  }
  return s;
}

Status CheckBatchColumns(const Batch& batch, const Schema& schema, const std::string& table) {
  bool same = batch.num_columns() == schema.fields.size();
  for (size_t i = 0; same && i < batch.num_columns(); ++i) {
    const DataType& a = batch.column(i).type();
    const DataType& b = schema.fields[i].type;
    same = a.kind() == b.kind() && a.scale() == b.scale() &&
           (!a.is_list() || (a.list().type.kind() == b.list().type.kind() &&
                             a.list().type.scale() == b.list().type.scale()));
  }
  if (same) return Status::OK();
  return Status::Internal("a batch for table " + table + " does not have the stream's columns");
}

}  // namespace ferry::sink
