// A table commit as the Iceberg REST protocol describes one: requirements that the table's
// current metadata must meet, and updates that turn it into the next metadata. One shape for
// every catalog: the SQL catalog checks and applies a commit itself (ferry's own writes and, as
// `ferry catalog serve`, everyone else's), a REST catalog sends it as a CommitTableRequest.
//
// Requirements and updates are kept as the JSON objects the protocol defines (the OpenAPI
// document's TableRequirement and TableUpdate), so that what ferry sends, what it accepts from
// other writers and what it applies are the same objects.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <string>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/lake/catalog.h"
#include "ferry/lake/metadata.h"

namespace ferry::lake {

struct TableCommit {
  TableIdent ident;
  Json requirements = Json::array();  // {"type": "assert-...", ...}
  Json updates = Json::array();       // {"action": "...", ...}
};

// The commit that turns `base` into `next` (both of table `ident`), with the requirements that
// make it safe to apply to whatever the catalog holds when it arrives: the table's uuid, every
// branch and tag of `base` (and each ref the commit sets) still where `base` had them, and for
// schema, spec and sort-order changes the ids they were derived from. After building it, the
// commit is applied to a copy of `base` and compared with `next`: a change the protocol cannot
// express (a field edited by hand) is kInternal naming the field, never a silent difference.
Result<TableCommit> DescribeCommit(const TableIdent& ident, const TableMetadata& base,
                                   const TableMetadata& next);

// OK when every requirement holds for `current` (nullptr: the table does not exist, which only
// assert-create accepts). kCommitFailed naming the first requirement that does not hold;
// kInvalidArgument for a requirement that is malformed or of an unknown type.
Status CheckRequirements(const Json& requirements, const TableMetadata* current);

// Applies `updates` in order to `metadata` (whose StartUpdate the caller has run: last-updated-ms
// is the commit's time). Errors: kInvalidArgument for a malformed update, one of an unknown
// action, or one that contradicts the metadata (a ref to a snapshot that does not exist, a
// snapshot id used twice); kNotSupported for a valid update ferry's catalog does not apply
// (another format version, encryption keys); kCommitFailed for a snapshot whose sequence number
// is not above the table's (another writer's snapshot came first: rebuild and retry). On error
// `metadata` is left partly changed: apply to a copy.
Status ApplyUpdates(TableMetadata& metadata, const Json& updates);

// Whether `current` shows `updates` applied: for a commit that adds snapshots, each of them
// present (their ids are the commit's own); for others, every effect: each ref set where the
// update set it, each removed snapshot and ref gone, each property set or removed. Used
// after a commit whose outcome was lost: true means it landed (or its effects are there anyway),
// so sending it again could only duplicate it.
bool UpdatesVisible(const TableMetadata& current, const Json& updates);

// "assert-ref-snapshot-id main" — a requirement in a few words, for messages.
std::string DescribeRequirement(const Json& requirement);

}  // namespace ferry::lake
