// Held changes on disk: what a change-log reader holds past its memory limit (a transaction of
// millions of rows, a checkpoint of many wide keys) goes into sorted run files, read back merged.
//
// A run is a file of entries sorted by (table, key), each with its arrival sequence number and an
// opaque record (the reader's encoding of the change). Merging runs gives, for every (table, key),
// the entry of the run with the highest rank (SetRank; 0 by default), and among those the highest
// sequence number — the last change of the key, whichever run holds it — in (table, key) order, so
// a reader's reductions (last change per key, skip by position, a dropped transaction's runs left
// out) survive the trip to disk. Every entry is checksummed (CRC32): a damaged file is kCorruption,
// never a wrong change.
//
// Files are `ferry-spill-<pid>-<n>.run` in the folder given; a run's file is removed when it is
// dropped, and every file with the store; RemoveLeftovers removes those of processes that no
// longer run (a crash). Writing past the disk's space is kIOError naming the folder and the
// setting that moves it.
//
// Not thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/status.h"

namespace ferry::source {

class ChangeSpill {
 public:
  struct Entry {
    uint32_t table = 0;
    std::string_view key;
    uint64_t seq = 0;
    std::string_view record;
    int run = -1;  // the run it was read from (Merge, ReadBack)
  };

  // `dir` must exist. `setting` names what moves it, for messages ("temp_dir").
  ChangeSpill(std::string dir, std::string setting);
  ~ChangeSpill();
  ChangeSpill(const ChangeSpill&) = delete;
  ChangeSpill& operator=(const ChangeSpill&) = delete;

  // Writes `sorted` (ordered by table, then key bytes; one entry per (table, key)) as a run.
  // Returns its id.
  Result<int> WriteRun(const std::vector<Entry>& sorted);
  // Writes a reader's held changes as one run and empties them: `maps` per table, key -> change
  // (with its `seq`; a sequence of pairs may hold a key more than once, the highest seq wins),
  // each change's record `encode(change)`. Says once, until ReadBack, that
  // changes are spilling past `memory_limit`.
  template <typename Map, typename Encode>
  Result<int> WriteMaps(std::vector<Map>* maps, const Encode& encode, size_t memory_limit) {
    std::vector<Entry> entries;
    std::vector<std::string> records;
    size_t n = 0;
    for (const auto& m : *maps) n += m.size();
    entries.reserve(n);
    records.reserve(n);  // no reallocation: entries view the records
    for (size_t t = 0; t < maps->size(); ++t) {
      for (const auto& [key, change] : (*maps)[t]) {
        records.push_back(encode(change));
        entries.push_back({static_cast<uint32_t>(t), key, change.seq, records.back()});
      }
    }
    // A key's changes in arrival order may repeat in one map (a transaction's list): the
    // latest first, the one the merge keeps.
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      if (a.table != b.table) return a.table < b.table;
      if (a.key != b.key) return a.key < b.key;
      return a.seq > b.seq;
    });
    Result<int> id = WriteRun(entries);
    if (!id.ok()) return id;
    for (auto& m : *maps) m = Map();
    Announce(memory_limit);
    return id;
  }
  // Merge, for a reader's checkpoint: says how much is read back; the runs are dropped after.
  Status ReadBack(const std::vector<int>& ids,
                  const std::function<bool(int run, uint32_t table)>& skip,
                  const std::function<Status(const Entry&)>& each);
  // Removes a run's file.
  void DropRun(int id);
  // A run's precedence over others for the same key (a reader whose arrival order is not its
  // commit order ranks its runs by commit).
  void SetRank(int id, uint64_t rank) {
    auto it = runs_.find(id);
    if (it != runs_.end()) it->second.rank = rank;
  }
  // Reads the runs `ids` merged: `each` gets, in (table, key) order, the entry of the highest
  // sequence number of every (table, key), unless `skip(run, table)` says the run's entries of
  // that table do not count (then the next highest counts). Views are valid during the call.
  Status Merge(const std::vector<int>& ids,
               const std::function<bool(int run, uint32_t table)>& skip,
               const std::function<Status(const Entry&)>& each);

  // Bytes in the files of the live runs.
  uint64_t disk_bytes() const { return disk_bytes_; }
  const std::string& dir() const { return dir_; }

  // Removes the spill files in `dir` of processes that no longer run. Returns how many.
  static int RemoveLeftovers(const std::string& dir);

 private:
  std::string Path(int id) const;
  void Announce(size_t memory_limit);
  bool announced_ = false;  // since the last ReadBack

  std::string dir_;
  std::string setting_;
  int next_ = 0;
  struct Run {
    uint64_t bytes = 0;
    uint64_t rank = 0;
  };
  std::map<int, Run> runs_;
  uint64_t disk_bytes_ = 0;
};

}  // namespace ferry::source
