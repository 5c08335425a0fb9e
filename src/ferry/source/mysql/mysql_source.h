// The MySQL/MariaDB source: discovery from information_schema, full refresh in primary-key
// ranges, incremental windows on a cursor column, all read inside one START TRANSACTION WITH
// CONSISTENT SNAPSHOT on one connection (InnoDB tables: one consistent point; MySQL and MariaDB
// cannot share a snapshot with another connection, so chunks are read one after another).
//
// Selected with `source: {type: mysql, url: mysql://user:password@host:3306/db}` (or host, port,
// user, password, database; `databases` for several). CDC (the binary log) is not read by this
// source: cdc and cdc_only streams are refused at check and sync, naming what is supported.
#pragma once

#include <memory>

#include "ferry/source/source.h"

namespace ferry::source {

Result<std::unique_ptr<Source>> OpenMysqlSource(config::SourceConfig& cfg);

}  // namespace ferry::source
