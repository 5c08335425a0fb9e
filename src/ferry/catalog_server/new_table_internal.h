// The first metadata of a table a REST client creates: from a CreateTableRequest (its schema,
// partition spec, write order, properties and location), or from the updates of a create
// transaction (a commit whose requirements hold assert-create, after a stage-create).
//
// The schema is kept as the client's JSON (nested structs, lists and maps included: the table
// belongs to whoever writes it, not only to ferry) with the field ids the client gave; ids that
// are missing, not positive or used twice are a kInvalidArgument naming the field. The spec's and
// the order's source ids must name fields of the schema.
//
// Internal to the catalog server. Pure functions; no I/O.
#pragma once

#include <string>

#include "ferry/base/status.h"
#include "ferry/lake/metadata.h"

namespace ferry::catalog_server {

using lake::Json;

// Format version 2 metadata of a new table from `request` (the CreateTableRequest JSON: name,
// schema, partition-spec, write-order, properties; its location is ignored: `location` is where
// the table goes), with table uuid `uuid`. The property "format-version" is taken out (Java
// does the same); a value other than 2 is kNotSupported. Other errors: kInvalidArgument naming
// what is wrong in the request.
Result<lake::TableMetadata> MetadataFromCreateRequest(const Json& request,
                                                      const std::string& location,
                                                      const std::string& uuid);

// Metadata of a new table built by applying `updates` (a create transaction's: assign-uuid,
// add-schema, set-current-schema, add-spec, set-location, ..., possibly add-snapshot) to an
// empty table at `default_location` (a set-location update moves it). The uuid is the one
// assign-uuid gives, else `fallback_uuid`. Errors: those of lake::ApplyUpdates, and
// kInvalidArgument when the updates leave the table without a current schema.
Result<lake::TableMetadata> MetadataFromCreateUpdates(const Json& updates,
                                                      const std::string& default_location,
                                                      const std::string& fallback_uuid);

// Whether `location` lies strictly below the warehouse at `warehouse` (both URIs or absolute
// paths; "file:/a", "file:///a" and "/a" are the same place; s3a:// is s3://), with no empty,
// "." or ".." segment. The server writes metadata files only below its warehouse.
bool LocationUnder(const std::string& location, const std::string& warehouse);

}  // namespace ferry::catalog_server
