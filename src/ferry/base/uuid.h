// Random (version 4) UUIDs and random ids.
#pragma once

#include <cstdint>
#include <string>

namespace ferry {

std::string NewUuid();  // "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx"
// A positive random 63-bit id (Iceberg snapshot ids).
int64_t NewPositiveId();
// Milliseconds since the Unix epoch.
int64_t NowMs();

}  // namespace ferry
