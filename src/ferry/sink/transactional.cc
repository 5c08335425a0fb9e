#include "ferry/sink/transactional.h"

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/sink/sink_util.h"

namespace ferry::sink {

namespace {

std::vector<size_t> AllColumns(const Schema& s) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.fields.size(); ++i) out.push_back(i);
  return out;
}

}  // namespace

TransactionalStream::TransactionalStream(std::string table_text,
                                         std::shared_ptr<const Schema> schema, Json marker)
    : schema_(std::move(schema)),
      all_(AllColumns(*schema_)),
      keys_(KeyPositions(*schema_)),
      table_text_(std::move(table_text)),
      marker_(std::move(marker)) {}

Result<CommitResult> TransactionalStream::Commit(const std::string& load, const Json& marker,
                                                 const std::map<std::string, std::string>&,
                                                 const MarkerCheck& already_landed) {
  FaultPoint("sink.data_written");
  FERRY_RETURN_IF_ERROR(CheckCommitLoad(load));
  return Transact(
      marker, already_landed,
      [&]() -> Status { return load.empty() ? ApplyChanges() : Status::OK(); },
      "sink.before_commit", "sink.after_commit", "committing to");
}

Result<CommitResult> TransactionalStream::Transact(const Json& marker,
                                                   const MarkerCheck& already_landed,
                                                   const std::function<Status()>& work,
                                                   const char* before, const char* after,
                                                   std::string_view what) {
  FERRY_RETURN_IF_ERROR(Begin());
  Result<CommitResult> r = [&]() -> Result<CommitResult> {
    FERRY_ASSIGN_OR_RETURN(Json current, LockedMarker());
    if (already_landed(current)) return CommitResult{true};
    FERRY_RETURN_IF_ERROR(work());
    FERRY_RETURN_IF_ERROR(SetMarker(marker));
    if (before != nullptr) FaultPoint(before);
    return CommitResult{false};
  }();
  if (!r.ok() || r->already_landed) {
    Rollback();
    if (!r.ok()) return r.status().WithContext(std::string(what) + " " + table_text_);
    return r;
  }
  FERRY_RETURN_IF_ERROR(CommitOrSettle(already_landed));
  if (after != nullptr) FaultPoint(after);
  return CommitResult{false};
}

Status TransactionalStream::CommitOrSettle(const MarkerCheck& already_landed) {
  Status s = SendCommit(FaultInjected("sink.commit_outcome_lost"));
  const Pending done = pending_;
  pending_ = Pending();
  auto count = [&]() {
    totals_.rows += done.rows;
    totals_.bytes += done.bytes;
  };
  if (s.ok()) {
    count();
    return Status::OK();
  }
  if (!OutcomeUnknown(s)) return s.WithContext("committing to " + table_text_);
  FERRY_LOG(kWarn) << table_text_ << ": the connection was lost during COMMIT; reading the "
                   << "checkpoint row back to learn whether it landed";
  if (!Reconnect().ok()) return s.WithContext("committing to " + table_text_);
  FERRY_ASSIGN_OR_RETURN(Json current, ReadMarker());
  if (already_landed(current)) {
    count();  // this commit's rows landed: they were written by this sync
    return Status::OK();
  }
  return Status::Unavailable("the connection to the destination was lost during COMMIT and the " +
                             table_text_ +
                             " checkpoint row shows the commit did not land; it is retried");
}

Result<Json> ParseCheckpointMarker(std::optional<std::string_view> text, const std::string& table) {
  if (!text) return Json(nullptr);
  Json j = Json::parse(*text, nullptr, false);
  if (j.is_discarded()) {
    return Status::Corruption("the checkpoint row of " + table + " is not JSON");
  }
  return j;
}

}  // namespace ferry::sink
