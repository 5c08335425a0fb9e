#include "ferry/source/postgres/pg_changes.h"

#include <algorithm>

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
      for (size_t t = 0; t < tables_.size(); ++t) {
        if (!txn_[t].empty()) txn_[t].clear();
        // The commit record starts at m.lsn: a position past it means the table has this
        // transaction already.
        skip_[t] = m.lsn < tables_[t].position;
      }
      return Status::OK();
    case 'C': {
      if (!in_txn_) return Status::Corruption("a Commit message outside a transaction");
      for (size_t t = 0; t < tables_.size(); ++t) Hold(t, txn_[t]);
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
      if (m.subxid == m.xid) {
        streamed_.erase(it);
      } else {
        it->second.subs.erase(m.subxid);
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
  streamed_.clear();
  in_stream_ = false;
}

void ChangeSet::Hold(size_t t, Changes& txn) {
  if (txn.empty()) return;
  for (const auto& [key, change] : txn) {
    size_t bytes = key.size() + 64;
    for (const auto& v : change.values) bytes += v.bytes.size() + sizeof(Value);
    pending_bytes_ += bytes;
  }
  // The transaction's changes move into the held ones without copying: keys new to the
  // checkpoint as whole nodes; for keys already held, the later change replaces the earlier.
  Changes& held = held_[t];
  const size_t before = held.size();
  held.merge(txn);
  pending_changes_ += held.size() - before;
  for (auto& [key, change] : txn) held[key] = std::move(change);
  txn.clear();
}

Status ChangeSet::OnStreamCommit(const PgOutputMessage& m, ChangeEvent* event,
                                 std::string* detail) {
  auto it = streamed_.find(m.xid);
  if (it == streamed_.end()) {  // nothing of the followed tables in it
    last_commit_end_ = m.end_lsn;
    return Status::OK();
  }
  StreamedTxn tx = std::move(it->second);
  streamed_.erase(it);
  for (size_t t = 0; t < tables_.size(); ++t) {
    // The commit record starts at m.lsn: a position past it means the table has it already.
    if (m.lsn < tables_[t].position || !tx.truncated[t]) continue;
    *event = ChangeEvent::kTruncated;
    *detail = tables_[t].nspname + "." + tables_[t].relname;
    if (!ignore_truncate_) return Status::OK();  // the caller stops before this transaction
    break;
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (m.lsn < tables_[t].position) continue;
    // Per key, the last change among the subtransactions that were not rolled back.
    Changes merged;
    for (auto& [xid, tables] : tx.subs) {
      for (auto& [key, change] : tables[t]) {
        auto [pos, added] = merged.try_emplace(key);
        if (added || change.seq > pos->second.seq) pos->second = std::move(change);
      }
    }
    Hold(t, merged);
  }
  last_commit_end_ = m.end_lsn;
  return Status::OK();
}

std::vector<ChangeSet::Changes>& ChangeSet::Target(uint32_t xid) {
  if (!in_stream_) return txn_;
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
      if (std::find(dropped.begin(), dropped.end(), c.name) == dropped.end()) {
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
  } else {
    auto it = txn_[table].find(key);
    if (it != txn_[table].end()) return &it->second;
  }
  auto h = held_[table].find(key);
  return h == held_[table].end() ? nullptr : &h->second;
}

void ChangeSet::Put(std::vector<Changes>& target, size_t table, std::string key, Change c) {
  c.seq = ++seq_;
  target[table].insert_or_assign(std::move(key), std::move(c));
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
  auto key_only = [&](const std::vector<Value>& values) {
    Change c;
    c.deleted = true;
    c.values.resize(values.size());
    for (size_t k : table.key) c.values[k] = values[k];
    return c;
  };
  if (m.type == 'D') {
    if (m.old_kind == 0) return no_key("a delete");
    Put(target, t, old_key, key_only(old_values));
    return Status::OK();
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
        maybe_unresolved_ = true;
      }
    }
    if (m.old_kind != 0 && old_key != key) Put(target, t, old_key, key_only(old_values));
  }
  Change c;
  c.values = std::move(values);
  Put(target, t, std::move(key), std::move(c));
  return Status::OK();
}

std::vector<ChangeSet::Missing> ChangeSet::Unresolved() const {
  std::vector<Missing> out;
  if (!maybe_unresolved_) return out;
  for (size_t t = 0; t < tables_.size(); ++t) {
    for (const auto& [key, change] : held_[t]) {
      if (change.deleted) continue;
      bool missing = false;
      for (const auto& v : change.values) missing = missing || v.kind == 'u';
      if (!missing) continue;
      Missing m;
      m.table = t;
      m.key_id = key;
      for (size_t k : tables_[t].key) m.key_values.push_back(change.values[k].bytes);
      out.push_back(std::move(m));
    }
  }
  return out;
}

void ChangeSet::Resolve(const Missing& m,
                        const std::optional<std::vector<std::optional<std::string>>>& row) {
  auto it = held_[m.table].find(m.key_id);
  if (it == held_[m.table].end()) return;
  Change& c = it->second;
  if (!row) {
    Change del;
    del.deleted = true;
    del.values.resize(c.values.size());
    for (size_t k : tables_[m.table].key) del.values[k] = c.values[k];
    c = std::move(del);
    return;
  }
  for (size_t i = 0; i < c.values.size() && i < row->size(); ++i) {
    if (c.values[i].kind != 'u') continue;
    const auto& v = (*row)[i];
    c.values[i].kind = v ? 'b' : 'n';
    c.values[i].bytes = v ? *v : std::string();
  }
}

Status ChangeSet::TakeBatches(
    size_t batch_rows, const std::function<bool(size_t table, Batch& batch, bool deletes)>& emit) {
  for (size_t t = 0; t < tables_.size(); ++t) {
    const ChangeTable& table = tables_[t];
    std::vector<bool> is_key(table.columns.size(), false);
    for (size_t k : table.key) is_key[k] = true;
    Batch upserts(table.schema);
    Batch deletes(table.schema);
    for (const auto& [key, change] : held_[t]) {
      Batch& b = change.deleted ? deletes : upserts;
      for (size_t c = 0; c < change.values.size(); ++c) {
        const Value& v = change.values[c];
        Column& col = b.column(c);
        if (v.kind == 'n' || (change.deleted && !is_key[c])) {
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
  maybe_unresolved_ = false;
  return Status::OK();
}

}  // namespace ferry::source::pg
