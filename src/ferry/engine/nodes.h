// The graph nodes of a sync (see graph/graph.h): a source reading its streams' loads, windows
// and change logs; a source's change log shared by its streams; a destination table's sink, which
// commits at every checkpoint and records the progress in the state file. Internal to the engine.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ferry/engine/tasks.h"
#include "ferry/graph/align.h"
#include "ferry/graph/graph.h"

namespace ferry::engine {

// Reads `tasks` of `src` in order: each load's pending chunks (on up to `readers` connections
// sharing one snapshot), each incremental window, each per-stream change log, every one
// followed by its barrier.
std::unique_ptr<graph::Node> MakeSourceNode(source::Source* src, std::vector<StreamTask*> tasks,
                                            const SyncOptions& opts, int readers);

// CDC from a change log shared by all streams (PostgreSQL): one pass over the log feeds every
// stream's sink; a checkpoint becomes a barrier on every edge. `result` receives the read's end.
std::unique_ptr<graph::Node> MakeSharedLogSourceNode(source::Source* src,
                                                     std::vector<StreamTask*> tasks,
                                                     const SyncOptions& opts,
                                                     const config::CheckpointConfig& policy,
                                                     source::Source::SharedRead* result);

// Commits a destination table: the batches its parts' sources send, at every checkpoint, with
// every part's progress in the table's marker; then records the same progress in the state file.
// `changes_recorded`, when set, is called after each commit of changes is in the state file.
// `align`, for a merged table, hears when each checkpoint it handed on is complete.
std::unique_ptr<graph::Node> MakeSinkNode(TableTask* table, Recorder* recorder,
                                          const std::string& pipeline, const SyncOptions& opts,
                                          int64_t timeout_ms,
                                          std::function<void()> changes_recorded = nullptr,
                                          graph::AlignNode* align = nullptr);

}  // namespace ferry::engine
