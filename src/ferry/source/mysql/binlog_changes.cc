#include "ferry/source/mysql/binlog_changes.h"

#include <algorithm>
#include <cstring>

#include "ferry/base/assert.h"
#include "ferry/base/log.h"

namespace ferry::source {

BinlogChanges::BinlogChanges(std::vector<BinlogTable> tables)
    : tables_(std::move(tables)), held_(tables_.size()), txn_(tables_.size()) {}

std::pair<std::string, BinlogChanges::Change>& BinlogChanges::Held::Upsert(std::string&& key,
                                                                           bool* inserted) {
  if ((entries_.size() + 1) * 2 > slots_.size()) Grow();
  const uint64_t h = std::hash<std::string_view>{}(key);
  const auto tag = static_cast<uint32_t>(h ^ (h >> 32));
  const size_t mask = slots_.size() - 1;
  for (size_t at = tag & mask;; at = (at + 1) & mask) {
    const uint64_t slot = slots_[at];
    if (slot == 0) {
      entries_.emplace_back(std::move(key), Change{});
      slots_[at] = (uint64_t{tag} << 32) | entries_.size();
      *inserted = true;
      return entries_.back();
    }
    if (static_cast<uint32_t>(slot >> 32) != tag) continue;
    std::pair<std::string, Change>& entry = entries_[static_cast<uint32_t>(slot) - 1];
    if (entry.first == key) {
      *inserted = false;
      return entry;
    }
  }
}

void BinlogChanges::Held::Grow() {
  std::vector<uint64_t> old(std::max<size_t>(64, slots_.size() * 2), 0);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (uint64_t slot : old) {  // the tags place the entries again: no key is read
    if (slot == 0) continue;
    size_t at = (slot >> 32) & mask;
    while (slots_[at] != 0) at = (at + 1) & mask;
    slots_[at] = slot;
  }
}

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

Status BinlogChanges::Put(size_t t, RowOrigin::Op op,
                          const std::vector<std::optional<std::string_view>>& row,
                          const std::vector<bool>* typed) {
  const bool deleted = op == RowOrigin::Op::kDelete;
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
  c.origin.op = op;
  size_t size = 4 * table.columns.size();
  for (size_t i = 0; i < row.size() && i < table.columns.size(); ++i) {
    if (!row[i]) continue;
    if (row[i]->size() >= kTyped) {
      return Status::InvalidArgument("table " + table.display + ", column " + table.columns[i] +
                                     ": a value of 2 GiB or more is not held");
    }
    size += row[i]->size();
  }
  c.packed.reserve(size);
  for (size_t i = 0; i < table.columns.size(); ++i) {
    const bool present = i < row.size() && row[i];
    uint32_t n = kNull;
    if (present) {
      n = static_cast<uint32_t>(row[i]->size());
      if (typed != nullptr && i < typed->size() && (*typed)[i]) n |= kTyped;
    }
    c.packed.append(reinterpret_cast<const char*>(&n), sizeof n);
    if (present) c.packed.append(*row[i]);
  }
  c.seq = ++seq_;
  txn_bytes_ += BytesOf(key, c);
  ++txn_changes_;
  txn_[t].emplace_back(std::move(key), std::move(c));
  Recount();
  return MaybeSpill();
}

template <typename Map>
Result<int> BinlogChanges::SpillMaps(std::vector<Map>* maps) {
  return spill_->WriteMaps(
      maps,
      [](const Change& c) {
        std::string r;
        r.reserve(c.packed.size() + 1 + RowOrigin::kPackedBytes);
        r.push_back(c.deleted ? 'd' : 'u');  // deleted flag, origin, packed row
        c.origin.AppendPacked(&r);
        r.append(c.packed);
        return r;
      },
      memory_limit_);
}

Status BinlogChanges::MaybeSpill() {
  if (spill_ == nullptr || txn_bytes_ + held_bytes_ <= memory_limit_) return Status::OK();
  const uint64_t before = spill_->disk_bytes();
  if (txn_bytes_ >= held_bytes_) {
    FERRY_ASSIGN_OR_RETURN(int id, SpillMaps(&txn_));
    txn_runs_.push_back(id);
    txn_spilled_changes_ += txn_changes_;
    txn_spilled_bytes_ += spill_->disk_bytes() - before;
    txn_changes_ = txn_bytes_ = 0;
  } else {
    FERRY_ASSIGN_OR_RETURN(int id, SpillMaps(&held_));
    held_runs_.push_back(id);
    spilled_changes_ += held_changes_;
    spilled_bytes_ += spill_->disk_bytes() - before;
    held_changes_ = held_bytes_ = 0;
  }
  Recount();
  return Status::OK();
}

Status BinlogChanges::Update(
    size_t t, const std::vector<std::optional<std::string_view>>& before,
    const std::vector<std::optional<std::string_view>>& after, const std::vector<bool>* typed,
    const std::function<Result<const std::vector<std::optional<std::string_view>>*>()>&
        whole_before) {
  if (KeyMoved(t, before, after)) {  // the old row is gone
    const std::vector<std::optional<std::string_view>>* old = &before;
    if (whole_before) {
      FERRY_ASSIGN_OR_RETURN(old, whole_before());
    }
    FERRY_RETURN_IF_ERROR(Put(t, RowOrigin::Op::kDelete, *old, typed));
  }
  return Put(t, RowOrigin::Op::kUpdate, after, typed);
}

bool BinlogChanges::KeyMoved(size_t t, const std::vector<std::optional<std::string_view>>& before,
                             const std::vector<std::optional<std::string_view>>& after) {
  return KeyOf(t, before, &old_key_) && KeyOf(t, after, &new_key_) && old_key_ != new_key_;
}

void BinlogChanges::Commit(Position end, int64_t commit_us) {
  RowOrigin committed;
  committed.commit_us = commit_us;
  end.StampOn(&committed);
  // The transaction's runs join the held ones; tables that hold it already skip their entries.
  for (int run : txn_runs_) {
    run_commits_[run] = committed;
    std::vector<bool>& skip = skipped_[run];
    skip.assign(tables_.size(), false);
    for (size_t t = 0; t < tables_.size(); ++t) skip[t] = !Counts(t, end);
    held_runs_.push_back(run);
  }
  txn_runs_.clear();
  spilled_changes_ += txn_spilled_changes_;
  spilled_bytes_ += txn_spilled_bytes_;
  txn_spilled_changes_ = txn_spilled_bytes_ = 0;
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (txn_[t].empty()) continue;
    if (Counts(t, end)) {
      Held& held = held_[t];
      for (auto& [key, change] : txn_[t]) {
        const size_t bytes = BytesOf(key, change);
        bool inserted = false;
        auto& [held_key, held_change] = held.Upsert(std::move(key), &inserted);
        if (inserted) {
          ++held_changes_;
        } else {
          held_bytes_ -= std::min(held_bytes_, BytesOf(held_key, held_change));
        }
        held_bytes_ += bytes;
        held_change = std::move(change);
        held_change.origin.commit_us = commit_us;
        end.StampOn(&held_change.origin);
      }
    }
    txn_[t].clear();  // a deque gives its blocks back
  }
  txn_changes_ = txn_bytes_ = 0;
  Recount();
}

void BinlogChanges::DropTransaction() {
  for (auto& txn : txn_) txn.clear();
  for (int run : txn_runs_) {
    spill_->DropRun(run);
    run_commits_.erase(run);
  }
  txn_runs_.clear();
  txn_changes_ = txn_bytes_ = 0;
  txn_spilled_changes_ = txn_spilled_bytes_ = 0;
  Recount();
}

Status BinlogChanges::Append(size_t t, const RowOrigin& origin, std::string_view packed,
                             Batch* upserts, Batch* deletes) {
  const BinlogTable& table = tables_[t];
  Batch& b = origin.op == RowOrigin::Op::kDelete ? *deletes : *upserts;
  b.origins().push_back(origin);
  for (size_t c = 0; c < table.columns.size(); ++c) {
    Column& col = b.column(c);
    if (packed.size() < sizeof(uint32_t)) {
      return Status::Corruption("table " + table.display + ": a held change is cut short");
    }
    uint32_t n;
    std::memcpy(&n, packed.data(), sizeof n);
    packed.remove_prefix(sizeof n);
    std::string_view v;
    const bool typed = n != kNull && (n & kTyped) != 0;
    if (typed) n &= ~kTyped;
    if (n != kNull) {
      if (packed.size() < n) {
        return Status::Corruption("table " + table.display + ": a held change is cut short");
      }
      v = packed.substr(0, n);
      packed.remove_prefix(n);
    }
    if (n == kNull) {
      col.AppendNull();
      continue;
    }
    Status s = typed ? AppendMysqlBinary(table.wires[c], v, &col)
                     : AppendMysqlValue(table.wires[c], v, &col);
    if (!s.ok()) {
      return Status(s.code(), "table " + table.display + ", column " + table.columns[c] +
                                  " (a change from the binary log): " + s.message());
    }
  }
  return Status::OK();
}

Status BinlogChanges::TakeBatches(
    size_t batch_rows, const std::function<bool(size_t table, Batch& batch, bool deletes)>& emit) {
  std::unique_ptr<Batch> upserts, deletes;
  size_t current = tables_.size();
  auto start = [&](size_t t) {
    current = t;
    upserts = std::make_unique<Batch>(tables_[t].schema);
    deletes = std::make_unique<Batch>(tables_[t].schema);
  };
  auto flush = [&](bool all) -> Status {
    if (current == tables_.size()) return Status::OK();
    for (bool del : {true, false}) {
      Batch& b = del ? *deletes : *upserts;
      if (b.num_rows() == 0 || (!all && !BatchFull(b, batch_rows))) continue;
      if (!emit(current, b, del)) return Status::Cancelled("sync stopped");
      b.Clear();
    }
    return Status::OK();
  };
  if (!held_runs_.empty()) {
    // Some are on disk: the rest go there too, and every run is read back merged by key.
    if (held_changes_ > 0) {
      FERRY_ASSIGN_OR_RETURN(int id, SpillMaps(&held_));
      held_runs_.push_back(id);
    }
    FERRY_RETURN_IF_ERROR(spill_->ReadBack(
        held_runs_,
        [&](int run, uint32_t t) {
          auto it = skipped_.find(run);
          return it != skipped_.end() && it->second[t];
        },
        [&](const ChangeSpill::Entry& e) -> Status {
          if (e.table != current) {
            FERRY_RETURN_IF_ERROR(flush(true));
            start(e.table);
          }
          if (e.record.size() < 1 + RowOrigin::kPackedBytes) {
            return Status::Corruption("a held change without its row");
          }
          RowOrigin origin = RowOrigin::Unpacked(e.record.data() + 1);
          if (auto it = run_commits_.find(e.run); it != run_commits_.end()) {
            origin.commit_us = it->second.commit_us;
            Position::Of(it->second).StampOn(&origin);
          }
          FERRY_RETURN_IF_ERROR(Append(e.table, origin,
                                       e.record.substr(1 + RowOrigin::kPackedBytes), upserts.get(),
                                       deletes.get()));
          return flush(false);
        }));
    FERRY_RETURN_IF_ERROR(flush(true));
    held_runs_.clear();
    skipped_.clear();
    run_commits_.clear();
  } else {
    for (size_t t = 0; t < tables_.size(); ++t) {
      if (held_[t].empty()) continue;
      start(t);
      for (const auto& [key, change] : held_[t]) {
        FERRY_RETURN_IF_ERROR(
            Append(t, change.origin, change.packed, upserts.get(), deletes.get()));
        FERRY_RETURN_IF_ERROR(flush(false));
      }
      FERRY_RETURN_IF_ERROR(flush(true));
    }
  }
  for (auto& h : held_) h = Held();  // their room too: one large checkpoint's is not kept
  held_changes_ = held_bytes_ = 0;
  spilled_changes_ = spilled_bytes_ = 0;
  Recount();
  return Status::OK();
}

}  // namespace ferry::source
