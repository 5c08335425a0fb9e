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

Result<std::string> DumpJson(const nlohmann::json& j, std::string_view what) {
  try {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string(what) + " cannot be written as JSON: " + e.what());
  }
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
