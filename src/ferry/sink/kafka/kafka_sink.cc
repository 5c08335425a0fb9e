#include "ferry/sink/kafka/kafka_sink.h"

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/sink/kafka/events.h"
#include "ferry/sink/sink_util.h"
#include "ferry/source/position.h"

namespace ferry::sink {
namespace {

using kafka::EventEncoder;
using kafka::EventSource;
using kafka::Format;

constexpr const char* kCommitHeader = "ferry.commit";
constexpr int kCommitAttempts = 3;  // a retriable commit error is retried

// librdkafka settings ferry sets itself.
constexpr const char* kOwnProperties[] = {"bootstrap.servers",  "transactional.id",
                                          "enable.idempotence", "isolation.level",
                                          "enable.auto.commit", "group.id"};

struct Settings {
  std::string pipeline;
  std::string brokers;
  std::string topic = "{pipeline}.{table}";
  std::string state_topic = "ferry.checkpoints";
  Format format = Format::kEnvelope;
  bool tombstones = true;
  int64_t timeout_ms = 60000;
  std::map<std::string, std::string> properties;
};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The first error librdkafka reported on a client (connection failures, fatal errors), for
// messages that would otherwise say only "timed out".
struct ClientErrors {
  std::mutex mu;
  std::string last;
  void Set(std::string e) {
    std::lock_guard<std::mutex> lock(mu);
    last = std::move(e);
  }
  std::string Get() {
    std::lock_guard<std::mutex> lock(mu);
    return last;
  }
};

// A delivery that failed, reported by the producer's callback (on the thread calling poll or
// flush: the stream's).
struct Deliveries {
  ClientErrors errors;
  std::string failed;  // the first failed delivery; empty: none
};

struct RdKafkaDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
  void operator()(rd_kafka_topic_t* t) const { rd_kafka_topic_destroy(t); }
};
using Client = std::unique_ptr<rd_kafka_t, RdKafkaDeleter>;
using Topic = std::unique_ptr<rd_kafka_topic_t, RdKafkaDeleter>;

void OnError(rd_kafka_t*, int err, const char* reason, void* opaque) {
  auto* d = static_cast<Deliveries*>(opaque);
  d->errors.Set(std::string(rd_kafka_err2name(static_cast<rd_kafka_resp_err_t>(err))) + ": " +
                reason);
}

void OnLog(const rd_kafka_t*, int level, const char* fac, const char* buf) {
  // Levels are syslog's: up to 3 errors, 4 warnings. Messages never hold configured secrets.
  if (level <= 4) {
    FERRY_LOG(kWarn) << "kafka " << fac << ": " << buf;
  }
}

void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) return;
  auto* d = static_cast<Deliveries*>(opaque);
  if (d->failed.empty()) {
    d->failed = std::string("a record for topic ") + rd_kafka_topic_name(m->rkt) +
                " was not delivered: " + rd_kafka_err2str(m->err);
  }
}

// A client of `type` with the user's properties and `own` (ferry's, which win). `opaque` receives
// the error and delivery callbacks.
Result<Client> NewClient(const Settings& s, rd_kafka_type_t type,
                         const std::map<std::string, std::string>& own, Deliveries* opaque) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[512];
  auto set = [&](const std::string& k, const std::string& v, bool user) -> Status {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) == RD_KAFKA_CONF_OK) {
      return Status::OK();
    }
    // The value is not shown: it may be a secret.
    return Status::InvalidArgument((user ? "destination.properties." + k : "Kafka setting " + k) +
                                   " was refused: " + err);
  };
  Status st = set("bootstrap.servers", s.brokers, false);
  for (const auto& [k, v] : s.properties) {
    if (!st.ok()) break;
    // Producer settings on the state reader (and the reverse) only warn in librdkafka; a
    // setting it does not know is an error for both.
    st = set(k, v, true);
  }
  for (const auto& [k, v] : own) {
    if (!st.ok()) break;
    st = set(k, v, false);
  }
  if (!st.ok()) {
    rd_kafka_conf_destroy(conf);
    return st;
  }
  rd_kafka_conf_set_opaque(conf, opaque);
  rd_kafka_conf_set_error_cb(conf, OnError);
  rd_kafka_conf_set_log_cb(conf, OnLog);
  if (type == RD_KAFKA_PRODUCER) rd_kafka_conf_set_dr_msg_cb(conf, OnDelivery);
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);  // takes conf, also on failure
  if (rk == nullptr) return Status::InvalidArgument(std::string("Kafka client: ") + err);
  return Client(rk);
}

bool IsFenced(rd_kafka_resp_err_t code) {
  return code == RD_KAFKA_RESP_ERR__FENCED || code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
         code == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

// A transactional API call's error as a Status (the error freed), or OK.
Status TxnStatus(rd_kafka_error_t* e, const std::string& what, bool* retriable = nullptr,
                 bool* abortable = nullptr, bool* fatal = nullptr, bool* fenced = nullptr) {
  if (e == nullptr) return Status::OK();
  if (retriable) *retriable = rd_kafka_error_is_retriable(e);
  if (abortable) *abortable = rd_kafka_error_txn_requires_abort(e);
  if (fatal) *fatal = rd_kafka_error_is_fatal(e);
  const rd_kafka_resp_err_t code = rd_kafka_error_code(e);
  if (fenced) *fenced = IsFenced(code);
  std::string m = what + ": " + rd_kafka_error_string(e);
  rd_kafka_error_destroy(e);
  if (code == RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED ||
      code == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
      code == RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED) {
    return Status::PermissionDenied(
        m +
        " (the principal needs Write on the transactional id and the topics, and "
        "IdempotentWrite on the cluster for older brokers)");
  }
  return Status::Unavailable(m);
}

std::string StateKey(const std::string& pipeline, const std::string& table) {
  return pipeline + "/" + table;
}

std::string RandomCommitId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return Hex16(rng());
}

// One record of a topic as a scan hands it out; key and value point into the message (value
// nullptr: a tombstone).
struct Record {
  int32_t partition = 0;
  int64_t offset = 0;
  std::string_view key;
  const char* value = nullptr;
  size_t size = 0;
};

// Every record of `topic`, read with isolation.level=read_committed up to the end each partition
// had when the scan began, partition by partition in offset order; a missing topic has none.
// `what` names the scan for messages.
Status ScanTopic(const Settings& s, const std::string& topic, const std::string& what,
                 const std::function<Status(const Record&)>& each) {
  Deliveries errors;
  FERRY_ASSIGN_OR_RETURN(Client c, NewClient(s, RD_KAFKA_CONSUMER,
                                             {{"group.id", "ferry-reader"},
                                              {"isolation.level", "read_committed"},
                                              {"enable.auto.commit", "false"},
                                              {"enable.partition.eof", "true"},
                                              {"auto.offset.reset", "earliest"}},
                                             &errors));
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(c.get(), topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(c.get(), 0, rkt, &md, static_cast<int>(s.timeout_ms));
  rd_kafka_topic_destroy(rkt);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    const std::string seen = errors.errors.Get();
    return Status::Unavailable(what + ": the brokers at " + s.brokers + " did not answer (" +
                               rd_kafka_err2str(err) + (seen.empty() ? "" : "; " + seen) + ")");
  }
  std::vector<int32_t> partitions;
  rd_kafka_resp_err_t topic_err = RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
  if (md->topic_cnt == 1) {
    topic_err = md->topics[0].err;
    for (int i = 0; i < md->topics[0].partition_cnt; ++i) {
      partitions.push_back(md->topics[0].partitions[i].id);
    }
  }
  rd_kafka_metadata_destroy(md);
  if (topic_err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || partitions.empty()) {
    return Status::OK();
  }
  if (topic_err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::Unavailable(what + ": " + rd_kafka_err2str(topic_err));
  }
  // Where each partition ends now; partitions without records are not read.
  std::map<int32_t, int64_t> ends;
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(0);
  for (int32_t p : partitions) {
    int64_t lo = 0, hi = 0;
    err = rd_kafka_query_watermark_offsets(c.get(), topic.c_str(), p, &lo, &hi,
                                           static_cast<int>(s.timeout_ms));
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_topic_partition_list_destroy(list);
      return Status::Unavailable(what + ": the end of partition " + std::to_string(p) + ": " +
                                 rd_kafka_err2str(err));
    }
    if (hi <= lo) continue;
    ends[p] = hi;
    rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  if (ends.empty()) {
    rd_kafka_topic_partition_list_destroy(list);
    return Status::OK();
  }
  err = rd_kafka_assign(c.get(), list);
  rd_kafka_topic_partition_list_destroy(list);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::Unavailable(what + ": " + rd_kafka_err2str(err));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.timeout_ms);
  Status failed;
  std::set<int32_t> open;
  for (const auto& [p, hi] : ends) open.insert(p);
  while (!open.empty() && failed.ok()) {
    if (std::chrono::steady_clock::now() > deadline) {
      failed = Status::Unavailable(
          what + ": partition " + std::to_string(*open.begin()) +
          " was not read to its end within the timeout; a transaction may be open there (a "
          "crashed writer's is aborted by the broker after its transaction.timeout.ms)");
      break;
    }
    rd_kafka_message_t* m = rd_kafka_consumer_poll(c.get(), 200);
    if (m == nullptr) continue;
    const int32_t p = m->partition;
    auto end = ends.find(p);
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      // With read_committed the end is the last stable offset: records of an open transaction
      // lie beyond it, and committed ones may follow them. Wait until it passes the end seen.
      if (end != ends.end() && m->offset >= end->second) open.erase(p);
    } else if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      failed = Status::Unavailable(what + ": " + rd_kafka_message_errstr(m));
    } else if (end != ends.end() && m->offset < end->second) {
      if (m->offset + 1 >= end->second) open.erase(p);
      Record r;
      r.partition = p;
      r.offset = m->offset;
      r.key = std::string_view(static_cast<const char*>(m->key), m->key_len);
      r.value = static_cast<const char*>(m->payload);
      r.size = m->len;
      failed = each(r);
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(c.get());
  return failed;
}

// The columns record's key: the checkpoint's with a NUL and "columns" after it (no table or
// pipeline name holds a NUL), so a compacted state topic keeps both.
std::string ColumnsKey(const std::string& state_key) {
  return state_key + std::string("\0columns", 8);
}

// What the state topic holds for a pipeline: each table's last checkpoint and columns record.
struct State {
  std::map<std::string, Json> markers;  // by state key
  std::map<std::string, Json> columns;  // by state key
};

Result<State> ReadState(const Settings& s) {
  State out;
  const std::string prefix = s.pipeline + "/";
  const std::string what = "reading the checkpoints in Kafka topic " + s.state_topic;
  FERRY_RETURN_IF_ERROR(ScanTopic(s, s.state_topic, what, [&](const Record& r) -> Status {
    if (r.key.compare(0, prefix.size(), prefix) != 0) return Status::OK();
    std::string key(r.key);
    std::map<std::string, Json>* into = &out.markers;
    const std::string suffix("\0columns", 8);
    if (key.size() > suffix.size() &&
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0) {
      key.resize(key.size() - suffix.size());
      into = &out.columns;
    }
    if (r.value == nullptr) {
      into->erase(key);
      return Status::OK();
    }
    Json j = Json::parse(r.value, r.value + r.size, nullptr, false);
    if (j.is_discarded()) {
      return Status::Corruption(what + ": the record of " + key + " at offset " +
                                std::to_string(r.offset) + " of partition " +
                                std::to_string(r.partition) + " is not JSON");
    }
    (*into)[key] = std::move(j);
    return Status::OK();
  }));
  return out;
}

// A table as its topic's committed events leave it (`ferry verify`): each key's last event,
// unless that is a delete. A first pass finds each key's last offset (memory: every key once),
// a second reads those events' rows.
class KafkaReader final : public TableReader {
 public:
  KafkaReader(Settings s, std::string topic, std::shared_ptr<const Schema> schema)
      : s_(std::move(s)), topic_(std::move(topic)), schema_(std::move(schema)) {}

  const std::shared_ptr<const Schema>& schema() const override { return schema_; }
  std::string Version() const override { return "topic " + topic_; }

  Status Read(const std::function<Status(const Batch&)>& each) override {
    const std::string what = "reading Kafka topic " + topic_;
    const bool keyed = !schema_->identifier_field_ids.empty();
    std::unordered_map<std::string, std::pair<int32_t, int64_t>> last;
    if (keyed) {
      FERRY_RETURN_IF_ERROR(ScanTopic(s_, topic_, what, [&](const Record& r) -> Status {
        FERRY_ASSIGN_OR_RETURN(bool row, IsRow(r));
        if (row) {
          last[std::string(r.key)] = {r.partition, r.offset};
        } else {
          last.erase(std::string(r.key));
        }
        return Status::OK();
      }));
    }
    Batch batch(schema_);
    FERRY_RETURN_IF_ERROR(ScanTopic(s_, topic_, what, [&](const Record& r) -> Status {
      if (keyed) {
        auto it = last.find(std::string(r.key));
        if (it == last.end() || it->second != std::make_pair(r.partition, r.offset)) {
          return Status::OK();
        }
      } else {
        FERRY_ASSIGN_OR_RETURN(bool row, IsRow(r));
        if (!row) return Status::OK();
      }
      Json v = Json::parse(r.value, r.value + r.size, nullptr, false);
      const Json& row = s_.format == Format::kEnvelope ? v["after"] : v;
      for (size_t i = 0; i < schema_->fields.size(); ++i) {
        const Field& f = schema_->fields[i];
        auto it = row.find(f.name);
        Status st = kafka::AppendFromJson(it == row.end() ? Json() : *it, &batch.column(i));
        if (!st.ok()) {
          return Status::Corruption(what + ": column " + f.name + " of the event at offset " +
                                    std::to_string(r.offset) + " of partition " +
                                    std::to_string(r.partition) + ": " + st.message());
        }
      }
      if (batch.num_rows() >= kBatchRows) {
        FERRY_RETURN_IF_ERROR(each(batch));
        batch = Batch(schema_);
      }
      return Status::OK();
    }));
    if (batch.num_rows() > 0) FERRY_RETURN_IF_ERROR(each(batch));
    return Status::OK();
  }

 private:
  static constexpr size_t kBatchRows = 4096;

  // Whether record `r` leaves a row (an insert, update or read), not a delete or tombstone.
  Result<bool> IsRow(const Record& r) const {
    if (r.value == nullptr) return false;
    Json v = Json::parse(r.value, r.value + r.size, nullptr, false);
    if (v.is_discarded() || !v.is_object()) {
      return Status::Corruption("Kafka topic " + topic_ + ": the record at offset " +
                                std::to_string(r.offset) + " of partition " +
                                std::to_string(r.partition) + " is not a JSON object");
    }
    if (s_.format == Format::kFlat) return !v.value("__deleted", false);
    auto op = v.find("op");
    return !(op != v.end() && *op == "d") && v.contains("after") && v["after"].is_object();
  }

  const Settings s_;
  const std::string topic_;
  const std::shared_ptr<const Schema> schema_;
};

class KafkaStream final : public SinkStream {
 public:
  KafkaStream(const Settings& s, std::string table, std::string topic,
              std::shared_ptr<const Schema> schema)
      : s_(s),
        table_(std::move(table)),
        topic_(std::move(topic)),
        schema_(std::move(schema)),
        encoder_(schema_, s.format, s.pipeline, table_),
        state_key_(StateKey(s.pipeline, table_)) {}

  ~KafkaStream() override { Abort(); }

  // The transactional producer, its transactions initialised (which fences an older producer of
  // the same id and completes or aborts what it left open).
  Status Connect() {
    DropProducer();
    deliveries_ = std::make_unique<Deliveries>();
    FERRY_ASSIGN_OR_RETURN(producer_,
                           NewClient(s_, RD_KAFKA_PRODUCER,
                                     {{"transactional.id", "ferry." + s_.pipeline + "." + table_},
                                      {"partitioner", s_.properties.count("partitioner")
                                                          ? s_.properties.at("partitioner")
                                                          : "murmur2_random"},
                                      {"transaction.timeout.ms", std::to_string(s_.timeout_ms)}},
                                     deliveries_.get()));
    Status st =
        TxnStatus(rd_kafka_init_transactions(producer_.get(), static_cast<int>(s_.timeout_ms)),
                  "starting the transactional producer of " + table_ + " at " + s_.brokers);
    if (!st.ok()) {
      const std::string seen = deliveries_->errors.Get();
      DropProducer();
      return seen.empty() ? st : Status(st.code(), st.message() + " (" + seen + ")");
    }
    in_txn_ = false;
    // The topics' partitions known before the first record (else it waits for the producer's
    // next metadata refresh, up to a second); a missing topic is created here by brokers that
    // create topics on demand.
    events_.reset(rd_kafka_topic_new(producer_.get(), topic_.c_str(), nullptr));
    state_.reset(rd_kafka_topic_new(producer_.get(), s_.state_topic.c_str(), nullptr));
    for (rd_kafka_topic_t* t : {events_.get(), state_.get()}) {
      const rd_kafka_metadata_t* md = nullptr;
      if (rd_kafka_metadata(producer_.get(), 0, t, &md, static_cast<int>(s_.timeout_ms)) ==
          RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_metadata_destroy(md);
      }
    }
    return Status::OK();
  }

  // The checkpoint the state topic holds for the table, read once the producer is initialised.
  void SetOpenedMarker(Json marker) { marker_ = std::move(marker); }

  const std::shared_ptr<const Schema>& schema() const override { return schema_; }
  Json Marker() const override { return marker_; }

  Status StartLoad(const std::string& run) override {
    if (run.empty()) return Status::InvalidArgument("a load needs a run id");
    return Status::OK();
  }
  Status Write(const Batch& batch) override { return SendRows(batch, /*load=*/true); }
  Status WriteUpserts(const Batch& batch) override {
    FERRY_RETURN_IF_ERROR(RequireKeyToUpsert(encoder_.keyed(), table_));
    return SendRows(batch, /*load=*/false);
  }
  Status WriteDeleteKeys(const Batch& batch) override {
    FERRY_RETURN_IF_ERROR(RequireKeyToUpsert(encoder_.keyed(), table_));
    FERRY_RETURN_IF_ERROR(CheckBatchColumns(batch, *schema_, table_));
    FERRY_RETURN_IF_ERROR(Begin());
    const int64_t now = NowMs();
    const bool origins = batch.origins().size() == batch.num_rows();
    for (size_t r = 0; r < batch.num_rows(); ++r) {
      FERRY_RETURN_IF_ERROR(encoder_.Key(batch, r, &key_));
      EventSource src = Source(origins ? &batch.origins()[r] : nullptr, /*load=*/false);
      src.op = 'd';
      FERRY_RETURN_IF_ERROR(encoder_.Delete(batch, r, src, now, &value_));
      FERRY_RETURN_IF_ERROR(Send(events_.get(), key_, &value_));
      if (s_.tombstones) FERRY_RETURN_IF_ERROR(Send(events_.get(), key_, nullptr));
      ++pending_;
    }
    return Status::OK();
  }
  uint64_t pending_rows() const override { return pending_; }
  bool HasPending() const override { return pending_ > 0; }
  // A marker alone is one record in a small transaction.
  bool CheapMarkerCommits() const override { return true; }

  Result<CommitResult> Commit(const std::string& load, const Json& marker,
                              const std::map<std::string, std::string>& summary,
                              const MarkerCheck& already_landed) override {
    (void)load;     // a load's events are the table's events: nothing to swap at publish
    (void)summary;  // Kafka keeps no commit summaries
    FaultPoint("sink.data_written");
    return Transact(marker, already_landed, "sink.before_commit", "sink.after_commit",
                    "committing to ");
  }
  Result<CommitResult> Publish(const std::string& load, const Json& marker,
                               const MarkerCheck& already_landed) override {
    if (load.empty()) return Status::InvalidArgument("Publish needs the load's run id");
    return Transact(marker, already_landed, "sink.before_publish", "sink.after_publish",
                    "publishing the load of ");
  }
  void DiscardPending() override { Abort(); }

  Totals totals() const override { return totals_; }

 private:
  EventSource Source(const RowOrigin* o, bool load) const {
    EventSource src;
    src.snapshot = load;
    src.commit = commit_id_;
    if (o == nullptr) return src;
    static constexpr char kOps[] = {'r', 'c', 'u', 'u'};  // a soft delete is an update
    src.op = kOps[static_cast<size_t>(o->op) & 3];
    src.commit_us = o->commit_us;
    const source::Position p = source::Position::Of(*o);
    if (!p.none()) src.position = p.ToString();
    return src;
  }

  Status SendRows(const Batch& batch, bool load) {
    FERRY_RETURN_IF_ERROR(CheckBatchColumns(batch, *schema_, table_));
    FERRY_RETURN_IF_ERROR(Begin());
    const int64_t now = NowMs();
    const bool origins = !load && batch.origins().size() == batch.num_rows();
    for (size_t r = 0; r < batch.num_rows(); ++r) {
      FERRY_RETURN_IF_ERROR(encoder_.Key(batch, r, &key_));
      const EventSource src = Source(origins ? &batch.origins()[r] : nullptr, load);
      FERRY_RETURN_IF_ERROR(encoder_.Row(batch, r, src, now, &value_));
      FERRY_RETURN_IF_ERROR(Send(events_.get(), key_, &value_));
      ++pending_;
    }
    return Status::OK();
  }

  // Begins a transaction unless one is open.
  Status Begin() {
    if (in_txn_) return Status::OK();
    if (!producer_) FERRY_RETURN_IF_ERROR(Connect());
    const std::string doing = "beginning a transaction for " + table_;
    Status begun = TxnStatus(rd_kafka_begin_transaction(producer_.get()), doing);
    if (!begun.ok()) return FatalOr(doing, begun);
    in_txn_ = true;
    commit_id_ = RandomCommitId();
    deliveries_->failed.clear();
    return Status::OK();
  }

  // Produces one record (`value` nullptr: a tombstone), waiting while the queue is full.
  // Events carry their transaction's id in the value (a header costs several allocations a
  // record); the state topic's records in the header `ferry.commit`.
  Status Send(rd_kafka_topic_t* topic, const std::string& key, const std::string* value) {
    const bool state = topic == state_.get();
    for (;;) {
      void* k = key.empty() ? nullptr : const_cast<char*>(key.data());
      void* v = value ? const_cast<char*>(value->data()) : nullptr;
      const size_t n = value ? value->size() : 0;
      const rd_kafka_resp_err_t err =
          state ? rd_kafka_producev(producer_.get(), RD_KAFKA_V_RKT(topic),
                                    RD_KAFKA_V_KEY(k, key.size()), RD_KAFKA_V_VALUE(v, n),
                                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                    RD_KAFKA_V_HEADER(kCommitHeader, commit_id_.data(),
                                                      static_cast<ssize_t>(commit_id_.size())),
                                    RD_KAFKA_V_END)
                : rd_kafka_producev(producer_.get(), RD_KAFKA_V_RKT(topic),
                                    RD_KAFKA_V_KEY(k, key.size()), RD_KAFKA_V_VALUE(v, n),
                                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) break;
      if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(producer_.get(), 50);
        continue;
      }
      const std::string doing =
          std::string("producing to Kafka topic ") + rd_kafka_topic_name(topic);
      return FatalOr(doing, Status::Unavailable(doing + ": " + rd_kafka_err2str(err)));
    }
    bytes_ += key.size() + (value ? value->size() : 0);
    if (++since_poll_ >= 1024) {
      since_poll_ = 0;
      rd_kafka_poll(producer_.get(), 0);  // delivery reports
      if (!deliveries_->failed.empty()) return Status::Unavailable(deliveries_->failed);
    }
    return Status::OK();
  }

  void Abort() {
    pending_ = 0;
    bytes_ = 0;
    if (!in_txn_ || !producer_) return;
    in_txn_ = false;
    Status st =
        TxnStatus(rd_kafka_abort_transaction(producer_.get(), static_cast<int>(s_.timeout_ms)),
                  "aborting the transaction of " + table_);
    // A producer that cannot abort is replaced: the next one's init aborts the transaction.
    if (!st.ok()) DropProducer();
  }

  // The checkpoint record and COMMIT around what was produced: the steps of
  // TransactionalStream's protocol, in Kafka's terms.
  Result<CommitResult> Transact(const Json& marker, const MarkerCheck& already_landed,
                                const char* before, const char* after, const char* what) {
    const std::string doing = what + table_;
    if (already_landed && already_landed(marker_)) {
      Abort();
      return CommitResult{true};
    }
    FERRY_ASSIGN_OR_RETURN(std::string marker_text, DumpJson(marker, "the marker"));
    FERRY_RETURN_IF_ERROR(Begin());
    // Every event acknowledged before the checkpoint record is produced: a broker that shows
    // records of open transactions (one without isolation) never shows a checkpoint whose
    // events are missing.
    const rd_kafka_resp_err_t flushed =
        rd_kafka_flush(producer_.get(), static_cast<int>(s_.timeout_ms));
    if (flushed != RD_KAFKA_RESP_ERR_NO_ERROR || !deliveries_->failed.empty()) {
      const std::string why = !deliveries_->failed.empty() ? deliveries_->failed
                                                           : std::string(rd_kafka_err2str(flushed));
      Status fatal = FatalOr(doing, Status::OK());
      if (!fatal.ok()) return fatal;
      Abort();
      return Status::Unavailable(doing + ": " + why + "; the transaction was aborted");
    }
    FaultPoint(before);
    if (!columns_sent_) {
      // The table's columns, for readers (`ferry verify`): once a run, in its first commit.
      FERRY_ASSIGN_OR_RETURN(std::string columns, DumpJson(ColumnsJson(*schema_), "the columns"));
      FERRY_RETURN_IF_ERROR(Send(state_.get(), ColumnsKey(state_key_), &columns));
    }
    FERRY_RETURN_IF_ERROR(Send(state_.get(), state_key_, &marker_text));
    const bool lost = FaultInjected("sink.commit_outcome_lost");
    Status st;
    bool retriable = false, abortable = false, fatal = false, fenced = false;
    for (int attempt = 1; attempt <= kCommitAttempts; ++attempt) {
      st = TxnStatus(rd_kafka_commit_transaction(producer_.get(), static_cast<int>(s_.timeout_ms)),
                     doing, &retriable, &abortable, &fatal, &fenced);
      if (st.ok() || !retriable) break;
    }
    if (st.ok() && !lost) {
      in_txn_ = false;
      Landed(marker);
      FaultPoint(after);
      return CommitResult{};
    }
    if (fenced) return Fenced(doing);
    if (!st.ok() && abortable) {
      Abort();
      return Status::Unavailable(st.message() + "; the transaction was aborted");
    }
    // The outcome is not known here: a new producer completes or aborts the transaction, and
    // the checkpoint read back tells which.
    in_txn_ = false;
    FERRY_RETURN_IF_ERROR(Connect());
    FERRY_ASSIGN_OR_RETURN(State state, ReadState(s_));
    auto it = state.markers.find(state_key_);
    const Json now = it == state.markers.end() ? Json() : it->second;
    if (already_landed && already_landed(now)) {
      Landed(marker);
      FaultPoint(after);
      return CommitResult{};
    }
    pending_ = 0;
    bytes_ = 0;
    return Status::Unavailable(doing + ": the commit's outcome was lost (" +
                               (st.ok() ? std::string("the answer was not read") : st.message()) +
                               ") and the checkpoint read back shows it did not land");
  }

  // The producer was fenced: it is dropped, and the error is not retried (a retry would fence
  // the other writer in turn).
  Status Fenced(const std::string& doing) {
    in_txn_ = false;
    DropProducer();
    pending_ = 0;
    bytes_ = 0;
    return Status::InvalidArgument(
        doing + ": the producer was fenced: another sync of pipeline '" + s_.pipeline +
        "' (elsewhere, with the same name and brokers) started a producer with the same "
        "transactional.id; this one stops. Give each pipeline its own name");
  }

  // When the producer had a fatal error, the error for `doing`: fenced (see Fenced), or another
  // (the producer is dropped: the retry starts a new one); else `otherwise`.
  Status FatalOr(const std::string& doing, Status otherwise) {
    if (!producer_) return otherwise;
    char why[512];
    const rd_kafka_resp_err_t fatal = rd_kafka_fatal_error(producer_.get(), why, sizeof why);
    if (fatal == RD_KAFKA_RESP_ERR_NO_ERROR) return otherwise;
    if (IsFenced(fatal)) return Fenced(doing);
    in_txn_ = false;
    DropProducer();
    pending_ = 0;
    bytes_ = 0;
    return Status::Unavailable(doing + ": " + why);
  }

  void DropProducer() {
    events_.reset();
    state_.reset();
    producer_.reset();
  }

  void Landed(const Json& marker) {
    marker_ = marker;
    columns_sent_ = true;
    totals_.rows += pending_;
    totals_.bytes += bytes_;
    pending_ = 0;
    bytes_ = 0;
  }

  const Settings s_;
  const std::string table_;
  const std::string topic_;
  const std::shared_ptr<const Schema> schema_;
  const EventEncoder encoder_;
  Json marker_;  // the checkpoint the state topic holds for this table, as last known
  const std::string state_key_;
  std::unique_ptr<Deliveries> deliveries_;
  Client producer_;
  Topic events_, state_;  // of producer_, destroyed before it
  bool in_txn_ = false;
  bool columns_sent_ = false;  // a commit of this run landed with the columns record
  std::string commit_id_;
  std::string key_, value_;  // reused buffers
  uint64_t pending_ = 0, bytes_ = 0;
  size_t since_poll_ = 0;
  Totals totals_;
};

class KafkaSink final : public Sink {
 public:
  explicit KafkaSink(Settings s) : s_(std::move(s)) {}

  std::string Describe() const override { return "Kafka at " + s_.brokers; }
  std::string Guarantee() const override {
    return "exactly-once for consumers with isolation.level=read_committed (events and "
           "checkpoint record in one producer transaction); at-least-once for read_uncommitted "
           "consumers";
  }
  std::string TableName(const std::string& stream) const override {
    auto t = kafka::TopicName(s_.topic, s_.pipeline, stream);
    return t.ok() ? *t : stream;
  }

  Result<std::unique_ptr<SinkStream>> OpenStream(const std::string& stream,
                                                 const Schema& source_schema,
                                                 bool replacing) override {
    (void)replacing;  // JSON events have no schema to replace
    FERRY_ASSIGN_OR_RETURN(std::string topic, kafka::TopicName(s_.topic, s_.pipeline, stream));
    if (topic == s_.state_topic) {
      return Status::InvalidArgument("table " + stream + " would be written to topic " + topic +
                                     ", the state topic; change destination.topic or state_topic");
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto [it, added] = topics_.emplace(topic, stream);
      if (!added && it->second != stream) {
        return Status::InvalidArgument("tables " + it->second + " and " + stream +
                                       " would both be written to Kafka topic " + topic +
                                       "; give destination.topic a template that tells them "
                                       "apart, or route them to one table");
      }
    }
    auto out = std::make_unique<KafkaStream>(s_, stream, topic,
                                             std::make_shared<const Schema>(source_schema));
    // The producer first: its init aborts what a crashed run of this table left open, which a
    // read_committed reader of the state topic would otherwise wait for.
    FERRY_RETURN_IF_ERROR(out->Connect());
    FERRY_ASSIGN_OR_RETURN(Json marker, ReadMarker(stream));
    out->SetOpenedMarker(std::move(marker));
    return std::unique_ptr<SinkStream>(std::move(out));
  }

  Result<Json> ReadMarker(const std::string& stream) override {
    FERRY_ASSIGN_OR_RETURN(State state, ReadState(s_));
    auto it = state.markers.find(StateKey(s_.pipeline, stream));
    return it == state.markers.end() ? Json() : it->second;
  }

  // The table's columns come from its columns record in the state topic: none, no table.
  Result<std::unique_ptr<TableReader>> OpenReader(const std::string& stream) override {
    FERRY_ASSIGN_OR_RETURN(std::string topic, kafka::TopicName(s_.topic, s_.pipeline, stream));
    FERRY_ASSIGN_OR_RETURN(State state, ReadState(s_));
    auto it = state.columns.find(StateKey(s_.pipeline, stream));
    if (it == state.columns.end()) return std::unique_ptr<TableReader>();
    const std::string what =
        "the columns record of " + stream + " in Kafka topic " + s_.state_topic;
    Result<Schema> schema = Status::Corruption("is not a JSON array");
    try {
      if (it->second.is_array()) schema = SchemaFromColumnsJson(it->second);
    } catch (const Json::exception& e) {
      schema = Status::Corruption(std::string("does not have the expected form: ") + e.what());
    }
    if (!schema.ok()) return Status::Corruption(what + " " + schema.status().message());
    return std::unique_ptr<TableReader>(
        new KafkaReader(s_, std::move(topic), std::make_shared<const Schema>(std::move(*schema))));
  }

  // A transaction of a producer of the pipeline's own: proves the brokers answer and the
  // principal may use transactions and write the state topic.
  Status ProbeStorage() override {
    Deliveries d;
    FERRY_ASSIGN_OR_RETURN(
        Client p, NewClient(s_, RD_KAFKA_PRODUCER,
                            {{"transactional.id", "ferry." + s_.pipeline + ".check"}}, &d));
    const std::string what = "probing Kafka at " + s_.brokers;
    Status st = TxnStatus(rd_kafka_init_transactions(p.get(), static_cast<int>(s_.timeout_ms)),
                          what + " (a transactional producer)");
    if (!st.ok()) {
      const std::string seen = d.errors.Get();
      return seen.empty() ? st : Status(st.code(), st.message() + " (" + seen + ")");
    }
    FERRY_RETURN_IF_ERROR(TxnStatus(rd_kafka_begin_transaction(p.get()), what));
    return TxnStatus(rd_kafka_commit_transaction(p.get(), static_cast<int>(s_.timeout_ms)),
                     what + " (an empty transaction)");
  }

 private:
  const Settings s_;
  std::mutex mu_;
  std::map<std::string, std::string> topics_;  // guarded by mu_: topic -> the table written there
};

}  // namespace

Result<std::unique_ptr<Sink>> OpenKafkaSink(config::DestinationConfig& cfg,
                                            const std::string& pipeline) {
  config::Options& o = cfg.options;
  Settings s;
  s.pipeline = pipeline;
  FERRY_ASSIGN_OR_RETURN(s.brokers, o.TakeString("brokers"));
  s.topic = o.TakeOptionalString("topic").value_or(s.topic);
  s.state_topic = o.TakeOptionalString("state_topic").value_or(s.state_topic);
  const std::string format = o.TakeOptionalString("format").value_or("json");
  const std::string deletes = o.TakeOptionalString("deletes").value_or("tombstone");
  FERRY_ASSIGN_OR_RETURN(s.timeout_ms, o.TakeDuration("timeout", s.timeout_ms, 1000));
  s.properties = o.TakeMap("properties");
  FERRY_RETURN_IF_ERROR(o.CheckAllUsed(
      {"brokers", "topic", "state_topic", "format", "deletes", "timeout", "properties"}));
  if (pipeline.empty()) return Status::InvalidArgument("the pipeline has no name");
  if (s.brokers.empty()) {
    return Status::InvalidArgument(
        "destination.brokers is empty; list the brokers, "
        "\"host:9092,host2:9092\"");
  }
  if (format == "json") {
    s.format = Format::kEnvelope;
  } else if (format == "flat") {
    s.format = Format::kFlat;
  } else {
    return Status::InvalidArgument("destination.format is '" + format +
                                   "'; use json (before/after/op/source events) or flat (the "
                                   "row's columns)");
  }
  if (deletes != "tombstone" && deletes != "event") {
    return Status::InvalidArgument("destination.deletes is '" + deletes +
                                   "'; use tombstone (a delete event, then a tombstone) or event");
  }
  s.tombstones = deletes == "tombstone";
  for (const char* k : kOwnProperties) {
    if (s.properties.count(k)) {
      return Status::InvalidArgument(
          std::string("destination.properties.") + k + " is set by ferry itself; remove it" +
          (std::string(k) == "bootstrap.servers" ? " (the brokers go in destination.brokers)"
                                                 : ""));
    }
  }
  if (s.properties.count("transaction.timeout.ms")) {
    return Status::InvalidArgument(
        "destination.properties.transaction.timeout.ms is set by ferry from destination.timeout; "
        "set that instead");
  }
  FERRY_ASSIGN_OR_RETURN(auto probe, kafka::TopicName(s.topic, pipeline, "schema.table"));
  (void)probe;  // the template's placeholders are checked before any table is opened
  if (s.state_topic.empty()) return Status::InvalidArgument("destination.state_topic is empty");
  // Reach the brokers now: a wrong address fails at once, naming it.
  auto state = ReadState(s);
  if (!state.ok()) return state.status().WithContext("connecting to the destination");
  return std::unique_ptr<Sink>(new KafkaSink(std::move(s)));
}

}  // namespace ferry::sink
