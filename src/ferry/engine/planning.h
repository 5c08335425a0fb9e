// Recovery planning: before anything is read, what each stream of a destination table does this
// sync, from its state file entry and the table's marker (engine/progress.h decides; this applies
// the decision: a new load's plan written first, a resumed load's stale plan replaced, a window's
// bounds, the changes to apply). Internal to the engine.
#pragma once

#include <string>

#include "ferry/engine/tasks.h"

namespace ferry::engine {

// Compares every part's state with its marker and plans what this sync does for the table,
// recording what must be in the state file before anything is read. The parts of a merged table
// load together (one load, one branch, one publish): when they are not at one point of one load
// (a source added, a state lost, a load resumed against one that finished), every part starts a
// new load.
Status PlanTable(TableTask* table, Recorder* recorder, const std::string& state_path);

}  // namespace ferry::engine
