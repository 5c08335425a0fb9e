// Which streams a pipeline covers and with what settings: shared by sync, check, state and
// verify, so that every command sees the same streams.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/config/config.h"
#include "ferry/source/source.h"
#include "ferry/transform/transform.h"

namespace ferry::engine {

// The configured streams (or every table when none are listed), in the pipeline's order. Checks
// that each exists (else the source's tables are listed) and that incremental streams name a
// cursor; `require_syncable`: a stream the source cannot read (unmapped types, privileges) is an
// error too.
Result<std::vector<source::StreamInfo>> SelectStreams(const config::SourceConfig& cfg,
                                                      std::vector<source::StreamInfo> all,
                                                      bool require_syncable = true);

// The stream's own settings, or the source's defaults when streams are not listed.
config::StreamConfig StreamSettings(const config::SourceConfig& cfg, const std::string& stream);

// A stream's `primary_key` setting replaces the key the source declares.
Status ApplyKeyOverride(const config::StreamConfig& sc, source::StreamInfo* info);

// The name the destination knows the stream's table by (the sink's `stream` argument): the
// stream's `table`, else its source's `table_name` template filled in, else the stream's name.
std::string DestinationName(const config::SourceConfig& cfg, const config::StreamConfig& settings,
                            const source::StreamInfo& info);

// The stream's transforms (columns, renames, computed columns, filter) over `info`, or nullptr
// when it has none; errors name the stream and the fix.
Result<std::shared_ptr<transform::Transform>> TransformOf(const config::SourceConfig& cfg,
                                                          const config::StreamConfig& settings,
                                                          const source::StreamInfo& info);

// What the destination table of a stream holds: its transform's output, else the table's columns.
Schema DestinationSchema(const transform::Transform* t, const source::StreamInfo& info);

// A stream's name in messages and reports: prefixed by its source's name when the pipeline has
// several sources ("east:orders").
std::string SourceLabel(const config::SourceConfig& cfg, const std::string& stream);

// The name of a stream's part in its destination table's marker: "" when the table has this one
// stream and the pipeline one source (the marker is the stream's own); its source's name when
// several sources merge their tables into it; the stream's label (SourceLabel) when its source
// has several streams in the table (`source_streams`: shards routed into one table).
std::string MarkerPart(const config::PipelineConfig& cfg, const config::SourceConfig& sc,
                       const std::string& stream, size_t source_streams);

// `s` with the source's name as context when the pipeline has several sources.
Status InSource(const config::SourceConfig& cfg, const Status& s);

// One source of the pipeline, open, with the streams it syncs (SelectStreams).
struct OpenedSource {
  std::unique_ptr<source::Source> src;
  std::vector<source::StreamInfo> streams;
};
Result<OpenedSource> OpenSelected(config::SourceConfig& cfg, bool require_syncable = true);

}  // namespace ferry::engine
