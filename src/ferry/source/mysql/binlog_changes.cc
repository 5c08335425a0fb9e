#include "ferry/source/mysql/binlog_changes.h"

#include <cstring>

#include "ferry/base/assert.h"

namespace ferry::source {

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
  size_t size = 4 * table.columns.size();
  for (size_t i = 0; i < row.size() && i < table.columns.size(); ++i) {
    if (row[i]) size += row[i]->size();
  }
  c.packed.reserve(size);
  for (size_t i = 0; i < table.columns.size(); ++i) {
    const bool present = i < row.size() && row[i];
    const uint32_t n = present ? static_cast<uint32_t>(row[i]->size()) : kNull;
    c.packed.append(reinterpret_cast<const char*>(&n), sizeof n);
    if (present) c.packed.append(*row[i]);
  }
  const size_t bytes = BytesOf(key, c);
  auto [it, inserted] = txn_[t].try_emplace(std::move(key));
  if (inserted) {
    ++txn_changes_;
  } else {
    txn_bytes_ -= std::min(txn_bytes_, BytesOf(it->first, it->second));
  }
  txn_bytes_ += bytes;
  it->second = std::move(c);
  Recount();
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
      Changes& held = held_[t];
      for (auto& [key, change] : txn_[t]) {
        const size_t bytes = BytesOf(key, change);
        auto [it, inserted] = held.try_emplace(key);
        if (inserted) {
          ++held_changes_;
        } else {
          held_bytes_ -= std::min(held_bytes_, BytesOf(it->first, it->second));
        }
        held_bytes_ += bytes;
        it->second = std::move(change);
      }
    }
    txn_[t].clear();
  }
  txn_changes_ = txn_bytes_ = 0;
  Recount();
}

void BinlogChanges::DropTransaction() {
  for (auto& txn : txn_) txn.clear();
  txn_changes_ = txn_bytes_ = 0;
  Recount();
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
      std::string_view packed = change.packed;
      for (size_t c = 0; c < table.columns.size(); ++c) {
        Column& col = b.column(c);
        FERRY_CHECK(packed.size() >= sizeof(uint32_t));
        uint32_t n;
        std::memcpy(&n, packed.data(), sizeof n);
        packed.remove_prefix(sizeof n);
        std::string_view v;
        if (n != kNull) {
          FERRY_CHECK(packed.size() >= n);
          v = packed.substr(0, n);
          packed.remove_prefix(n);
        }
        if (n == kNull || (change.deleted && !is_key[c])) {
          col.AppendNull();
          continue;
        }
        Status s = AppendMysqlValue(table.wires[c], v, &col);
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
    held_[t] = Changes();  // its buckets too: one large checkpoint's table is not kept
  }
  held_changes_ = held_bytes_ = 0;
  Recount();
  return Status::OK();
}

}  // namespace ferry::source
