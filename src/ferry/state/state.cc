#include "ferry/state/state.h"

#include "ferry/base/fault.h"
#include "ferry/base/fs.h"

namespace ferry::state {

PipelineState::PipelineState(std::string pipeline) : pipeline_(std::move(pipeline)) {
  doc_ =
      Json{{"version", 1}, {"pipeline", pipeline_}, {"type", "STREAM"}, {"streams", Json::array()}};
}

Result<PipelineState> PipelineState::FromJson(const Json& doc, const std::string& origin) {
  auto bad = [&](const std::string& what) {
    return Status::Corruption("state " + origin + " is not a ferry state file: " + what +
                              ". Move it away to start over; ferry then rebuilds progress from "
                              "the destination's markers where they exist");
  };
  if (!doc.is_object()) return bad("the top level is not an object");
  if (!doc.contains("version") || !doc["version"].is_number_integer()) return bad("no version");
  if (doc["version"].get<int>() != 1) {
    return Status::NotSupported("state " + origin + " has version " + doc["version"].dump() +
                                "; this ferry reads version 1");
  }
  if (!doc.contains("pipeline") || !doc["pipeline"].is_string()) return bad("no pipeline name");
  if (!doc.contains("streams") || !doc["streams"].is_array()) return bad("no streams list");
  for (const auto& s : doc["streams"]) {
    if (!s.is_object() || !s.contains("stream") || !s["stream"].is_string() ||
        !s.contains("namespace") || !s["namespace"].is_string() || !s.contains("state") ||
        !s["state"].is_object()) {
      return bad("a stream entry lacks stream/namespace/state");
    }
  }
  if (doc.contains("type") && doc["type"] != "STREAM" && doc["type"] != "GLOBAL") {
    return bad("type is neither STREAM nor GLOBAL");
  }
  PipelineState st;
  st.pipeline_ = doc["pipeline"].get<std::string>();
  st.doc_ = doc;
  return st;
}

Json PipelineState::Stream(const std::string& ns, const std::string& stream) const {
  for (const auto& s : doc_["streams"]) {
    if (s["namespace"] == ns && s["stream"] == stream) return s["state"];
  }
  return nullptr;
}

void PipelineState::SetStream(const std::string& ns, const std::string& stream, Json state) {
  for (auto& s : doc_["streams"]) {
    if (s["namespace"] == ns && s["stream"] == stream) {
      s["state"] = std::move(state);
      return;
    }
  }
  doc_["streams"].push_back(
      Json{{"stream", stream}, {"namespace", ns}, {"state", std::move(state)}});
}

void PipelineState::RemoveStream(const std::string& ns, const std::string& stream) {
  auto& arr = doc_["streams"];
  for (auto it = arr.begin(); it != arr.end(); ++it) {
    if ((*it)["namespace"] == ns && (*it)["stream"] == stream) {
      arr.erase(it);
      return;
    }
  }
}

std::vector<std::pair<std::string, std::string>> PipelineState::Streams() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& s : doc_["streams"]) out.emplace_back(s["namespace"], s["stream"]);
  return out;
}

namespace {

class FileStateStore final : public StateStore {
 public:
  explicit FileStateStore(std::string path) : path_(std::move(path)) {}

  Result<std::optional<PipelineState>> Load() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!FileExists(path_)) return std::optional<PipelineState>();
    FERRY_ASSIGN_OR_RETURN(std::string text, ReadFile(path_));
    Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      return Status::Corruption("state file " + path_ +
                                " is not valid JSON (torn or edited by hand). It was left as it "
                                "is; move it away to start over, and ferry rebuilds progress from "
                                "the destination's markers where they exist");
    }
    FERRY_ASSIGN_OR_RETURN(PipelineState st, PipelineState::FromJson(doc, "file " + path_));
    return std::optional<PipelineState>(std::move(st));
  }

  Status Save(const PipelineState& state) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_RETURN_IF_ERROR(MakeDirs(ParentDir(path_)));
    std::string text = state.ToJson().dump(2) + "\n";
    return WriteFileAtomic(path_, text, "state.temp_written");
  }

  std::string Describe() const override { return "file " + path_; }

 private:
  std::mutex mu_;
  std::string path_;
};

}  // namespace

std::unique_ptr<StateStore> OpenFileStateStore(std::string path) {
  return std::make_unique<FileStateStore>(std::move(path));
}

}  // namespace ferry::state
