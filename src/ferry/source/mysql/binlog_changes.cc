#include "ferry/source/mysql/binlog_changes.h"

#include "ferry/base/assert.h"

namespace ferry::source {
namespace {

size_t BytesOf(const std::vector<std::optional<std::string>>& values) {
  size_t n = sizeof(std::optional<std::string>) * values.size() + 64;
  for (const auto& v : values) n += v ? v->size() : 0;
  return n;
}

}  // namespace

BinlogChanges::BinlogChanges(std::vector<BinlogTable> tables)
    : tables_(std::move(tables)), held_(tables_.size()), txn_(tables_.size()) {}

bool BinlogChanges::KeyOf(size_t t, const std::vector<std::optional<std::string_view>>& row,
                          std::string* id) const {
  id->clear();
  for (size_t k : tables_[t].key) {
    if (k >= row.size() || !row[k]) return false;
    const std::string_view v = *row[k];
    const uint32_t n = static_cast<uint32_t>(v.size());
    id->append(reinterpret_cast<const char*>(&n), sizeof(n));
    id->append(v);
  }
  return true;
}

void BinlogChanges::Hold(Changes& into, std::string key, Change c) {
  const size_t bytes = BytesOf(c.values) + key.size();
  auto [it, inserted] = into.try_emplace(std::move(key));
  if (inserted) {
    ++pending_changes_;
  } else {
    pending_bytes_ -= std::min(pending_bytes_, BytesOf(it->second.values) + it->first.size());
  }
  pending_bytes_ += bytes;
  it->second = std::move(c);
}

Status BinlogChanges::Put(size_t t, bool deleted,
                          const std::vector<std::optional<std::string_view>>& row) {
  FERRY_CHECK(t < tables_.size());
  const BinlogTable& table = tables_[t];
  std::string key;
  if (!KeyOf(t, row, &key)) {
    return Status::InvalidArgument("table " + table.display +
                                   ": a change in the binary log has no value in a key column; "
                                   "its rows cannot be told apart by key");
  }
  Change c;
  c.deleted = deleted;
  c.values.resize(table.columns.size());
  for (size_t i = 0; i < row.size() && i < c.values.size(); ++i) {
    if (row[i]) c.values[i] = std::string(*row[i]);
  }
  Hold(txn_[t], std::move(key), std::move(c));
  return Status::OK();
}

Status BinlogChanges::Update(size_t t, const std::vector<std::optional<std::string_view>>& before,
                             const std::vector<std::optional<std::string_view>>& after) {
  std::string old_key;
  std::string new_key;
  if (KeyOf(t, before, &old_key) && KeyOf(t, after, &new_key) && old_key != new_key) {
    // The key changed: the old row is gone.
    FERRY_RETURN_IF_ERROR(Put(t, /*deleted=*/true, before));
  }
  return Put(t, /*deleted=*/false, after);
}

void BinlogChanges::Commit(Position end) {
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (txn_[t].empty()) continue;
    if (Counts(t, end)) {
      for (auto& [key, change] : txn_[t]) held_[t].insert_or_assign(key, std::move(change));
    }
    txn_[t].clear();
  }
  pending_changes_ = 0;
  pending_bytes_ = 0;
  for (const auto& h : held_) {
    pending_changes_ += h.size();
    for (const auto& [key, change] : h) pending_bytes_ += key.size() + BytesOf(change.values);
  }
}

void BinlogChanges::DropTransaction() {
  for (auto& txn : txn_) txn.clear();
  Commit(Position());  // recounts what is held
}

Status BinlogChanges::TakeBatches(
    size_t batch_rows, const std::function<bool(size_t table, Batch& batch, bool deletes)>& emit) {
  for (size_t t = 0; t < tables_.size(); ++t) {
    const BinlogTable& table = tables_[t];
    std::vector<bool> is_key(table.columns.size(), false);
    for (size_t k : table.key) is_key[k] = true;
    Batch upserts(table.schema);
    Batch deletes(table.schema);
    for (const auto& [key, change] : held_[t]) {
      Batch& b = change.deleted ? deletes : upserts;
      for (size_t c = 0; c < change.values.size(); ++c) {
        Column& col = b.column(c);
        const auto& v = change.values[c];
        if (!v || (change.deleted && !is_key[c])) {
          col.AppendNull();
          continue;
        }
        Status s = AppendMysqlValue(table.wires[c], std::string_view(*v), &col);
        if (!s.ok()) {
          return Status(s.code(), "table " + table.display + ", column " + table.columns[c] +
                                      " (a change from the binary log): " + s.message());
        }
      }
      if (BatchFull(b, batch_rows)) {
        if (!emit(t, b, change.deleted)) return Status::Cancelled("sync stopped");
        b.Clear();
      }
    }
    if (deletes.num_rows() > 0 && !emit(t, deletes, true)) return Status::Cancelled("sync stopped");
    if (upserts.num_rows() > 0 && !emit(t, upserts, false)) {
      return Status::Cancelled("sync stopped");
    }
    held_[t].clear();
  }
  pending_changes_ = 0;
  pending_bytes_ = 0;
  for (const auto& txn : txn_) pending_changes_ += txn.size();
  return Status::OK();
}

}  // namespace ferry::source
