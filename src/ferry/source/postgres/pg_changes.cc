#include "ferry/source/postgres/pg_changes.h"

#include <algorithm>
#include <cstring>

#include "ferry/base/log.h"

namespace ferry::source::pg {

ChangeSet::ChangeSet(std::vector<ChangeTable> tables)
    : tables_(std::move(tables)),
      held_(tables_.size()),
      txn_(tables_.size()),
      skip_(tables_.size(), false) {}

Status ChangeSet::Apply(const PgOutputMessage& m, ChangeEvent* event, std::string* detail) {
  *event = ChangeEvent::kNone;
  switch (m.type) {
    case 'B':
      if (in_txn_ || in_stream_) return Status::Corruption("a Begin message inside a transaction");
      in_txn_ = true;
      txn_lsn_ = m.lsn;
      txn_time_ = m.commit_time_us;
      txn_bytes_ = 0;
      for (size_t t = 0; t < tables_.size(); ++t) {
        if (!txn_[t].empty()) txn_[t].clear();
        // The commit record starts at m.lsn: a position past it means the table has this
        // transaction already.
        skip_[t] = m.lsn < tables_[t].position;
      }
      return Status::OK();
    case 'C': {
      if (!in_txn_) return Status::Corruption("a Commit message outside a transaction");
      // Its runs join the held ones (tables that held it already have no changes in them).
      FERRY_RETURN_IF_ERROR(JoinCommitted(&txn_runs_, nullptr));
      for (size_t t = 0; t < tables_.size(); ++t) Hold(t, txn_[t]);
      txn_bytes_ = 0;
      Recount();
      in_txn_ = false;
      last_commit_end_ = m.end_lsn;
      return Status::OK();
    }
    case 'S': {
      if (in_txn_ || in_stream_) {
        return Status::Corruption("a Stream Start message inside a transaction");
      }
      in_stream_ = true;
      stream_xid_ = m.xid;
      StreamedTxn& tx = streamed_[m.xid];
      if (tx.truncated.empty()) tx.truncated.assign(tables_.size(), false);
      return Status::OK();
    }
    case 'E':
      if (!in_stream_) return Status::Corruption("a Stream Stop message outside a stream");
      in_stream_ = false;
      return Status::OK();
    case 'c':
      if (in_txn_ || in_stream_) {
        return Status::Corruption("a Stream Commit message inside a transaction");
      }
      return OnStreamCommit(m, event, detail);
    case 'A': {
      if (in_txn_ || in_stream_) {
        return Status::Corruption("a Stream Abort message inside a transaction");
      }
      auto it = streamed_.find(m.xid);
      if (it == streamed_.end()) return Status::OK();
      StreamedTxn& tx = it->second;
      for (auto& [sub, runs] : tx.runs) {
        if (m.subxid != m.xid && sub != m.subxid) continue;
        for (int run : runs) DropRun(run);
        runs.clear();
      }
      for (auto& [sub, bytes] : tx.sub_bytes) {
        if (m.subxid != m.xid && sub != m.subxid) continue;
        streamed_bytes_ -= std::min(streamed_bytes_, bytes);
        bytes = 0;
      }
      if (m.subxid == m.xid) {
        streamed_.erase(it);
      } else {
        tx.subs.erase(m.subxid);
        tx.runs.erase(m.subxid);
        tx.sub_bytes.erase(m.subxid);
      }
      return Status::OK();
    }
    case 'R':
      return OnRelation(m, event, detail);
    case 'I':
    case 'U':
    case 'D': {
      if (!in_txn_ && !in_stream_) return Status::Corruption("a row change outside a transaction");
      bool skip = false;
      if (Foreign(m.relid, &skip, event, detail) || skip) return Status::OK();
      FERRY_RETURN_IF_ERROR(Checked(m.relid, event, detail));
      if (*event != ChangeEvent::kNone) return Status::OK();
      return OnRow(m);
    }
    case 'T':
      for (uint32_t relid : m.truncated) {
        bool skip = false;
        if (Foreign(relid, &skip, event, detail)) return Status::OK();
        if (skip) continue;
        FERRY_RETURN_IF_ERROR(Checked(relid, event, detail));
        if (*event != ChangeEvent::kNone) return Status::OK();
        if (in_stream_) {
          // Known to count only at the transaction's commit (it may yet abort).
          auto it = relations_.find(relid);
          if (it != relations_.end()) streamed_[stream_xid_].truncated[it->second.table] = true;
          continue;
        }
        auto it = relations_.find(relid);
        if (it == relations_.end() || skip_[it->second.table]) continue;
        *event = ChangeEvent::kTruncated;
        const ChangeTable& t = tables_[it->second.table];
        *detail = t.nspname + "." + t.relname;
        return Status::OK();
      }
      return Status::OK();
    default:
      return Status::OK();  // types, origins, logical messages
  }
}

bool ChangeSet::Foreign(uint32_t relid, bool* skip, ChangeEvent* event, std::string* detail) {
  *skip = false;
  auto it = relations_.find(relid);
  if (it == relations_.end()) return false;
  const size_t t = it->second.table;
  if (tables_[t].relid == 0 || tables_[t].relid == relid) return false;
  if (skipped_relids_.count(relid) > 0 ||
      (!in_stream_ && (skip_[t] || txn_lsn_ < tables_[t].since))) {
    *skip = true;  // not the table's, already in it, or of an older table of the name
    return false;
  }
  *event = ChangeEvent::kRecreated;
  recreated_ = Recreated{t, relid};
  *detail = tables_[t].nspname + "." + tables_[t].relname;
  return true;
}

Status ChangeSet::Checked(uint32_t relid, ChangeEvent* event, std::string* detail) {
  auto it = relations_.find(relid);
  if (it == relations_.end() || it->second.checked) return Status::OK();
  return CheckRelation(&it->second, event, detail);
}

void ChangeSet::SkipRelation(uint32_t relid) { skipped_relids_.insert(relid); }

void ChangeSet::AdoptRelation(size_t table, uint32_t relid) { tables_[table].relid = relid; }

void ChangeSet::DropTransaction() {
  for (auto& c : txn_) c.clear();
  in_txn_ = false;
  for (int run : txn_runs_) DropRun(run);
  txn_runs_.clear();
  for (auto& [xid, tx] : streamed_) {
    for (auto& [sub, runs] : tx.runs) {
      for (int run : runs) DropRun(run);
    }
  }
  streamed_.clear();
  in_stream_ = false;
  txn_bytes_ = streamed_bytes_ = 0;
}

void ChangeSet::DropRun(int run) {
  if (spill_ != nullptr) spill_->DropRun(run);
  run_sizes_.erase(run);
  skipped_.erase(run);
  run_commits_.erase(run);
}

Status ChangeSet::JoinCommitted(std::vector<int>* runs, const std::vector<bool>* skip) {
  ++commits_;
  if (runs->empty()) return Status::OK();
  // What memory holds was committed before: it goes to disk first, ranked below this
  // transaction, so that its older changes of the same keys do not win over the runs'.
  if (held_changes_ > 0) {
    FERRY_ASSIGN_OR_RETURN(int id, SpillMaps(&held_));
    spill_->SetRank(id, commits_ - 1);
    JoinHeld(id);
    held_changes_ = held_bytes_ = 0;
  }
  for (int run : *runs) {
    spill_->SetRank(run, commits_);
    if (skip != nullptr) skipped_[run] = *skip;
    JoinHeld(run);
  }
  runs->clear();
  return Status::OK();
}

void ChangeSet::JoinHeld(int run) {
  held_runs_.push_back(run);
  auto it = run_sizes_.find(run);
  if (it != run_sizes_.end()) {
    spilled_changes_ += it->second.first;
    spilled_bytes_ += it->second.second;
  }
}

void ChangeSet::Hold(size_t t, Changes& txn) {
  if (txn.empty()) return;
  Changes& held = held_[t];
  for (auto& [key, change] : txn) {
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
  txn.clear();
  Recount();
}

Status ChangeSet::OnStreamCommit(const PgOutputMessage& m, ChangeEvent* event,
                                 std::string* detail) {
  auto it = streamed_.find(m.xid);
  if (it == streamed_.end()) {  // nothing of the followed tables in it
    ++commits_;
    last_commit_end_ = m.end_lsn;
    return Status::OK();
  }
  StreamedTxn tx = std::move(it->second);
  streamed_.erase(it);
  for (const auto& [sub, bytes] : tx.sub_bytes) {
    streamed_bytes_ -= std::min(streamed_bytes_, bytes);
  }
  std::vector<int> runs;
  for (const auto& [sub, of_sub] : tx.runs) runs.insert(runs.end(), of_sub.begin(), of_sub.end());
  for (size_t t = 0; t < tables_.size(); ++t) {
    // The commit record starts at m.lsn: a position past it means the table has it already.
    if (m.lsn < tables_[t].position || !tx.truncated[t]) continue;
    *event = ChangeEvent::kTruncated;
    *detail = tables_[t].nspname + "." + tables_[t].relname;
    if (!ignore_truncate_) {
      for (int run : runs) DropRun(run);
      return Status::OK();  // the caller stops before this transaction
    }
    break;
  }
  // Its runs join the held ones; tables that held it already skip their entries.
  std::vector<bool> skip(tables_.size(), false);
  for (size_t t = 0; t < tables_.size(); ++t) skip[t] = m.lsn < tables_[t].position;
  RowOrigin committed;
  committed.commit_us = m.commit_time_us;
  Position::Lsn(m.lsn).StampOn(&committed);
  for (int run : runs) run_commits_[run] = committed;
  FERRY_RETURN_IF_ERROR(JoinCommitted(&runs, &skip));
  Recount();
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (m.lsn < tables_[t].position) continue;
    // Per key, the last change among the subtransactions that were not rolled back.
    Changes merged;
    for (auto& [xid, tables] : tx.subs) {
      for (auto& [key, change] : tables[t]) {
        auto [pos, added] = merged.try_emplace(key);
        if (added || change.seq > pos->second.seq) {
          pos->second = std::move(change);
          pos->second.origin.commit_us = committed.commit_us;
          Position::Lsn(m.lsn).StampOn(&pos->second.origin);
        }
      }
    }
    Hold(t, merged);
  }
  last_commit_end_ = m.end_lsn;
  return Status::OK();
}

std::vector<ChangeSet::Changes>& ChangeSet::Target(uint32_t xid) {
  if (!in_stream_) return txn_;
  current_sub_ = xid;
  std::vector<Changes>& sub = streamed_[stream_xid_].subs[xid];
  if (sub.empty()) sub.resize(tables_.size());
  return sub;
}

void ChangeSet::AllowDroppedColumns(uint32_t relid, const std::vector<std::string>& names) {
  auto& d = dropped_[relid];
  d.insert(d.end(), names.begin(), names.end());
}

void ChangeSet::DecodeOlderType(uint32_t relid, const std::string& column, uint32_t type_oid,
                                PgWire wire) {
  older_types_[relid].push_back(OlderType{column, type_oid, wire});
}

Status ChangeSet::OnRelation(const PgOutputMessage& m, ChangeEvent* event, std::string* detail) {
  relations_.erase(m.relid);
  size_t t = 0;
  for (; t < tables_.size(); ++t) {
    if (tables_[t].nspname == m.nspname && tables_[t].relname == m.relname) break;
  }
  if (t == tables_.size()) return Status::OK();  // a table this sync does not follow
  Relation rel;
  rel.table = t;
  rel.relid = m.relid;
  rel.columns = m.columns;
  Relation& stored = relations_.emplace(m.relid, std::move(rel)).first->second;
  // Another relation than the table's: its columns are compared once it is adopted (Foreign).
  if (tables_[t].relid != 0 && tables_[t].relid != m.relid) return Status::OK();
  return CheckRelation(&stored, event, detail);
}

Status ChangeSet::CheckRelation(Relation* rel, ChangeEvent* event, std::string* detail) {
  const ChangeTable& table = tables_[rel->table];
  const auto& dropped = dropped_[rel->relid];
  const auto& older = older_types_[rel->relid];
  SchemaChange change;
  change.relid = rel->relid;
  change.table = rel->table;
  rel->to_column.clear();
  rel->older_wire.clear();
  for (const RelationColumn& c : rel->columns) {
    int found = -1;
    for (size_t i = 0; i < table.columns.size(); ++i) {
      if (table.columns[i] == c.name) found = static_cast<int>(i);
    }
    std::optional<PgWire> older_wire;
    if (found < 0) {
      if (std::find(dropped.begin(), dropped.end(), c.name) == dropped.end() &&
          std::find(table.ignored.begin(), table.ignored.end(), c.name) == table.ignored.end()) {
        change.unknown_columns.push_back(c.name);
      }
    } else if (table.type_oids[static_cast<size_t>(found)] != c.type_oid) {
      auto it = std::find_if(older.begin(), older.end(), [&](const OlderType& o) {
        return o.column == c.name && o.type_oid == c.type_oid;
      });
      if (it == older.end()) {
        change.retyped.push_back(Retyped{c.name, c.type_oid, c.typmod});
      } else {
        older_wire = it->wire;
      }
    }
    rel->to_column.push_back(found);
    rel->older_wire.push_back(older_wire);
  }
  if (!change.unknown_columns.empty() || !change.retyped.empty()) {
    *event = ChangeEvent::kSchemaChanged;
    *detail = "table " + table.nspname + "." + table.relname + ": " +
              (change.unknown_columns.empty()
                   ? "the type of column " + change.retyped[0].column + " changed"
                   : "column " + change.unknown_columns[0] + " was added");
    schema_change_ = std::move(change);
    return Status::OK();
  }
  rel->checked = true;
  return Status::OK();
}

Result<std::vector<ChangeSet::Value>> ChangeSet::ToColumns(const Relation& rel,
                                                           const std::vector<TupleValue>& tuple,
                                                           const char* what) const {
  const ChangeTable& table = tables_[rel.table];
  if (tuple.size() != rel.to_column.size()) {
    return Status::Corruption("table " + table.nspname + "." + table.relname + ": " + what +
                              " has " + std::to_string(tuple.size()) + " columns, the relation " +
                              std::to_string(rel.to_column.size()));
  }
  std::vector<Value> out(table.columns.size());
  for (size_t i = 0; i < tuple.size(); ++i) {
    if (rel.to_column[i] < 0) continue;  // a column dropped since
    const auto c = static_cast<size_t>(rel.to_column[i]);
    Value& v = out[c];
    v.kind = tuple[i].kind;
    v.bytes.assign(tuple[i].bytes.data(), tuple[i].bytes.size());
    if (rel.older_wire[i] && v.kind == 'b') {
      // A value of the column's older type: in the form of its type now, so that keys compare
      // and the batch decodes as they do for newer values.
      Status s = WidenPgValue(*rel.older_wire[i], table.wires[c], &v.bytes);
      if (!s.ok()) {
        return Status(s.code(), "table " + table.nspname + "." + table.relname + ", column " +
                                    table.columns[c] + " (" + what +
                                    ", of its older type): " + s.message());
      }
    }
  }
  return out;
}

bool ChangeSet::KeyOf(size_t table, const std::vector<Value>& values, std::string* id) const {
  id->clear();
  for (size_t k : tables_[table].key) {
    const Value& v = values[k];
    if (v.kind != 'b' && v.kind != 't') return false;
    uint32_t n = static_cast<uint32_t>(v.bytes.size());
    id->append(reinterpret_cast<const char*>(&n), sizeof n);
    id->append(v.bytes);
  }
  return true;
}

const ChangeSet::Change* ChangeSet::Find(size_t table, const std::string& key) const {
  if (in_stream_) {
    const Change* last = nullptr;
    auto tx = streamed_.find(stream_xid_);
    if (tx != streamed_.end()) {
      for (const auto& [xid, tables] : tx->second.subs) {
        auto it = tables[table].find(key);
        if (it != tables[table].end() && (!last || it->second.seq > last->seq)) last = &it->second;
      }
    }
    if (last) return last;
    // An earlier change of this transaction may be on disk: the held one would be older.
    if (tx != streamed_.end()) {
      for (const auto& [xid, runs] : tx->second.runs) {
        if (!runs.empty()) return nullptr;
      }
    }
  } else {
    auto it = txn_[table].find(key);
    if (it != txn_[table].end()) return &it->second;
    if (!txn_runs_.empty()) return nullptr;  // an earlier change may be on disk
  }
  auto h = held_[table].find(key);
  return h == held_[table].end() ? nullptr : &h->second;
}

Status ChangeSet::Put(std::vector<Changes>& target, size_t table, std::string key, Change c) {
  c.seq = ++seq_;
  if (!in_stream_) {  // a streamed transaction's commit is known at its end
    c.origin.commit_us = txn_time_;
    Position::Lsn(txn_lsn_).StampOn(&c.origin);
  }
  const size_t bytes = BytesOf(key, c);
  size_t* group = &txn_bytes_;
  if (in_stream_) group = &streamed_[stream_xid_].sub_bytes[current_sub_];
  auto [it, inserted] = target[table].try_emplace(std::move(key));
  if (!inserted) {
    const size_t old = BytesOf(it->first, it->second);
    *group -= std::min(*group, old);
    if (in_stream_) streamed_bytes_ -= std::min(streamed_bytes_, old);
  }
  *group += bytes;
  if (in_stream_) streamed_bytes_ += bytes;
  it->second = std::move(c);
  return MaybeSpill();
}

std::string ChangeSet::Encode(const Change& c) {
  std::string r;
  size_t n = 1 + RowOrigin::kPackedBytes;
  for (const auto& v : c.values) n += 5 + v.bytes.size();
  r.reserve(n);
  r.push_back(c.deleted ? 'd' : 'u');
  c.origin.AppendPacked(&r);
  for (const auto& v : c.values) {
    r.push_back(v.kind);
    const uint32_t len = static_cast<uint32_t>(v.bytes.size());
    r.append(reinterpret_cast<const char*>(&len), sizeof len);
    r.append(v.bytes);
  }
  return r;
}

Status ChangeSet::Decode(std::string_view r, uint64_t seq, Change* c) {
  if (r.empty()) return Status::Corruption("a held change without its row");
  c->deleted = r[0] == 'd';
  c->seq = seq;
  c->values.clear();
  r.remove_prefix(1);
  if (r.size() < RowOrigin::kPackedBytes) return Status::Corruption("a held change is cut short");
  c->origin = RowOrigin::Unpacked(r.data());
  r.remove_prefix(RowOrigin::kPackedBytes);
  while (!r.empty()) {
    if (r.size() < 5) return Status::Corruption("a held change is cut short");
    Value v;
    v.kind = r[0];
    uint32_t len;
    std::memcpy(&len, r.data() + 1, sizeof len);
    r.remove_prefix(5);
    if (r.size() < len) return Status::Corruption("a held change is cut short");
    v.bytes.assign(r.data(), len);
    r.remove_prefix(len);
    c->values.push_back(std::move(v));
  }
  return Status::OK();
}

Result<int> ChangeSet::SpillMaps(std::vector<Changes>* maps) {
  size_t n = 0;
  for (const auto& m : *maps) n += m.size();
  const uint64_t before = spill_->disk_bytes();
  FERRY_ASSIGN_OR_RETURN(int id, spill_->WriteMaps(maps, Encode, memory_limit_));
  run_sizes_[id] = {n, static_cast<size_t>(spill_->disk_bytes() - before)};
  return id;
}

Status ChangeSet::MaybeSpill() {
  if (spill_ == nullptr || held_bytes_ + txn_bytes_ + streamed_bytes_ <= memory_limit_) {
    return Status::OK();
  }
  // The largest group goes: the held changes, the open transaction's, or one subtransaction's.
  size_t largest = std::max(held_bytes_, txn_bytes_);
  StreamedTxn* in = nullptr;
  uint32_t sub = 0;
  for (auto& [xid, tx] : streamed_) {
    for (const auto& [s, bytes] : tx.sub_bytes) {
      if (bytes > largest) {
        largest = bytes;
        in = &tx;
        sub = s;
      }
    }
  }
  if (in != nullptr) {
    FERRY_ASSIGN_OR_RETURN(int id, SpillMaps(&in->subs[sub]));
    in->runs[sub].push_back(id);
    streamed_bytes_ -= std::min(streamed_bytes_, in->sub_bytes[sub]);
    in->sub_bytes[sub] = 0;
  } else if (txn_bytes_ >= held_bytes_) {
    FERRY_ASSIGN_OR_RETURN(int id, SpillMaps(&txn_));
    txn_runs_.push_back(id);
    txn_bytes_ = 0;
  } else {
    FERRY_ASSIGN_OR_RETURN(int id, SpillMaps(&held_));
    spill_->SetRank(id, commits_);  // every change in it was committed by now
    JoinHeld(id);
    held_changes_ = held_bytes_ = 0;
  }
  Recount();
  return Status::OK();
}

Status ChangeSet::OnRow(const PgOutputMessage& m) {
  auto it = relations_.find(m.relid);
  if (it == relations_.end()) return Status::OK();  // not followed
  const Relation& rel = it->second;
  const size_t t = rel.table;
  // (A streamed transaction's commit position is known at its end: see OnStreamCommit.)
  if (!in_stream_ && skip_[t]) return Status::OK();
  std::vector<Changes>& target = Target(m.xid);
  const ChangeTable& table = tables_[t];
  auto no_key = [&](const char* what) {
    std::string names;
    for (size_t k : table.key) names += (names.empty() ? "" : ", ") + table.columns[k];
    return Status::InvalidArgument(
        "table " + table.nspname + "." + table.relname + ": " + what +
        " without a value for key column(s) " + names +
        "; the destination matches rows by that key: make the key the table's primary key "
        "(or its REPLICA IDENTITY), or set ALTER TABLE ... REPLICA IDENTITY FULL");
  };
  std::vector<Value> old_values;
  std::string old_key;
  if (m.old_kind != 0) {
    FERRY_ASSIGN_OR_RETURN(old_values, ToColumns(rel, m.old_tuple, "an old row image"));
    if (!KeyOf(t, old_values, &old_key)) return no_key("an old row image");
  }
  // A delete keeps what the log has of the row: every value with REPLICA IDENTITY FULL (an old
  // row image, 'O'), its key otherwise ('K').
  auto deleted = [&](const std::vector<Value>& values) {
    Change c;
    c.deleted = true;
    c.origin.op = RowOrigin::Op::kDelete;
    if (m.old_kind == 'O') {
      c.values = values;
      return c;
    }
    c.values.resize(values.size());
    for (size_t k : table.key) c.values[k] = values[k];
    return c;
  };
  if (m.type == 'D') {
    if (m.old_kind == 0) return no_key("a delete");
    return Put(target, t, old_key, deleted(old_values));
  }
  FERRY_ASSIGN_OR_RETURN(auto values, ToColumns(rel, m.new_tuple, "a new row"));
  std::string key;
  if (!KeyOf(t, values, &key)) return no_key(m.type == 'I' ? "an insert" : "an update");
  if (m.type == 'U') {
    const Change* prior = nullptr;
    bool looked = false;
    for (size_t c = 0; c < values.size(); ++c) {
      if (values[c].kind != 'u') continue;
      if (m.old_kind == 'O' && old_values[c].kind != 'u') {
        values[c] = old_values[c];
        continue;
      }
      if (!looked) {
        prior = Find(t, m.old_kind != 0 ? old_key : key);
        looked = true;
      }
      if (prior && !prior->deleted && prior->values[c].kind != 'u') {
        values[c] = prior->values[c];
      } else {
        // Left unknown: read from the table at the checkpoint (TakeBatches' resolve).
      }
    }
    if (m.old_kind != 0 && old_key != key) {
      FERRY_RETURN_IF_ERROR(Put(target, t, old_key, deleted(old_values)));
    }
  }
  Change c;
  c.values = std::move(values);
  c.origin.op = m.type == 'I' ? RowOrigin::Op::kInsert : RowOrigin::Op::kUpdate;
  return Put(target, t, std::move(key), std::move(c));
}

Status ChangeSet::Append(size_t t, const Change& change, Batch* upserts, Batch* deletes) {
  const ChangeTable& table = tables_[t];
  Batch& b = change.deleted ? *deletes : *upserts;
  b.origins().push_back(change.origin);
  for (size_t c = 0; c < table.columns.size(); ++c) {
    Column& col = b.column(c);
    if (c >= change.values.size()) return Status::Corruption("a held change is cut short");
    const Value& v = change.values[c];
    if (v.kind == 'n' || (change.deleted && v.kind == 'u')) {
      col.AppendNull();
      continue;
    }
    Status s;
    if (v.kind == 'b' || (v.kind == 't' && table.wires[c] == PgWire::kText)) {
      s = DecodePgValue(table.wires[c], v.bytes, &col);
    } else if (v.kind == 'u') {
      s = Status::Internal("an unchanged TOASTed value was not resolved");
    } else {
      s = Status::Corruption("the value arrived as text, not in binary");
    }
    if (!s.ok()) {
      return Status(s.code(), "table " + table.nspname + "." + table.relname + ", column " +
                                  table.columns[c] + " (a change from the replication " +
                                  "stream): " + s.message());
    }
  }
  return Status::OK();
}

Status ChangeSet::TakeBatches(
    size_t batch_rows, const std::function<bool(size_t table, Batch& batch, bool deletes)>& emit,
    const Resolver& resolve) {
  std::unique_ptr<Batch> upserts, deletes;
  size_t current = tables_.size();
  std::vector<Change> unresolved;  // of table `current`, waiting for a lookup
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
  auto resolve_pending = [&]() -> Status {
    if (unresolved.empty()) return Status::OK();
    if (!resolve) return Status::Internal("an unchanged TOASTed value was not resolved");
    const ChangeTable& table = tables_[current];
    std::vector<std::vector<std::string>> keys;
    for (const Change& c : unresolved) {
      std::vector<std::string> k;
      for (size_t i : table.key) k.push_back(c.values[i].bytes);
      keys.push_back(std::move(k));
    }
    std::vector<Row> rows;
    FERRY_RETURN_IF_ERROR(resolve(current, keys, &rows));
    if (rows.size() != unresolved.size()) return Status::Internal("a lookup lost rows");
    for (size_t i = 0; i < unresolved.size(); ++i) {
      Change& c = unresolved[i];
      if (!rows[i]) {
        c.deleted = true;  // the row is gone: a later change in the log deletes it anyway
        c.origin.op = RowOrigin::Op::kDelete;
      } else {
        for (size_t v = 0; v < c.values.size() && v < rows[i]->size(); ++v) {
          if (c.values[v].kind != 'u') continue;
          const auto& got = (*rows[i])[v];
          c.values[v].kind = got ? 'b' : 'n';
          c.values[v].bytes = got ? *got : std::string();
        }
      }
      FERRY_RETURN_IF_ERROR(Append(current, c, upserts.get(), deletes.get()));
      FERRY_RETURN_IF_ERROR(flush(false));
    }
    unresolved.clear();
    return Status::OK();
  };
  auto start = [&](size_t t) -> Status {
    FERRY_RETURN_IF_ERROR(resolve_pending());
    FERRY_RETURN_IF_ERROR(flush(true));
    current = t;
    upserts = std::make_unique<Batch>(tables_[t].schema);
    deletes = std::make_unique<Batch>(tables_[t].schema);
    return Status::OK();
  };
  auto add = [&](size_t t, Change c) -> Status {
    if (t != current) FERRY_RETURN_IF_ERROR(start(t));
    const bool lacks = !c.deleted && std::any_of(c.values.begin(), c.values.end(),
                                                 [](const Value& v) { return v.kind == 'u'; });
    if (lacks) {
      unresolved.push_back(std::move(c));
      if (unresolved.size() >= kResolveKeys) return resolve_pending();
      return Status::OK();
    }
    FERRY_RETURN_IF_ERROR(Append(t, c, upserts.get(), deletes.get()));
    return flush(false);
  };
  if (!held_runs_.empty()) {
    // Some are on disk: the rest go there too, and every run is read back merged by key.
    if (held_changes_ > 0) {
      FERRY_ASSIGN_OR_RETURN(int id, SpillMaps(&held_));
      spill_->SetRank(id, commits_);
      JoinHeld(id);
    }
    Change c;
    FERRY_RETURN_IF_ERROR(spill_->ReadBack(
        held_runs_,
        [&](int run, uint32_t t) {
          auto it = skipped_.find(run);
          return it != skipped_.end() && it->second[t];
        },
        [&](const ChangeSpill::Entry& e) -> Status {
          FERRY_RETURN_IF_ERROR(Decode(e.record, e.seq, &c));
          if (auto it = run_commits_.find(e.run); it != run_commits_.end()) {
            c.origin.commit_us = it->second.commit_us;
            Position::Of(it->second).StampOn(&c.origin);
          }
          return add(e.table, std::move(c));
        }));
    for (int run : held_runs_) DropRun(run);
    held_runs_.clear();
  } else {
    for (size_t t = 0; t < tables_.size(); ++t) {
      for (auto& [key, change] : held_[t]) FERRY_RETURN_IF_ERROR(add(t, std::move(change)));
    }
  }
  FERRY_RETURN_IF_ERROR(resolve_pending());
  FERRY_RETURN_IF_ERROR(flush(true));
  for (auto& h : held_) h = Changes();  // their buckets too: one large checkpoint's are not kept
  held_changes_ = held_bytes_ = 0;
  spilled_changes_ = spilled_bytes_ = 0;
  Recount();
  return Status::OK();
}

}  // namespace ferry::source::pg
