// The FileIO of an s3:// warehouse (see file_io.h for the contract), over S3Client.
//
//   reads    OpenFile reads by range (one ranged GET per read; the last 64 KiB of a file, where
//            Parquet keeps its footer, are fetched once and served from memory), Read GETs a
//            whole small file;
//   writes   NewFile buffers up to S3Config::part_size_bytes: a file that stays below it is one
//            conditional PUT (If-None-Match: *) at Close(); a larger one becomes a multipart
//            upload whose parts are sent as they fill, up to upload_concurrency at once, so a
//            stream holds at most (upload_concurrency + 1) parts in memory, never the whole file.
//            Close() completes the upload (with If-None-Match: * where the store honours it);
//            a stream that fails or is dropped before Close() aborts its upload, so no parts are
//            left behind (an upload a killed process left open is aborted by `ferry maintain`'s
//            orphan removal);
//   listing  ListObjectsV2, page by page; deletion DeleteObject; Stat HeadObject.
// A new file's name being taken is found at Close() (412 to the conditional put), not by
// NewFile.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "ferry/lake/file_io.h"
#include "ferry/lake/s3_settings.h"

namespace ferry::lake {

// The FileIO for the s3:// location `location` (its bucket must be named), with settings
// resolved from `config` and the environment (ResolveS3Settings: its errors).
Result<std::shared_ptr<FileIO>> OpenS3FileIO(const std::string& location, const S3Config& config,
                                             const EnvLookup& env = ProcessEnvironment());

// The FileIO of one table whose catalog vends its storage credentials: `base` (the
// destination's s3: settings) with the vended endpoint, region and addressing style over it, and
// the vended credentials, refreshed through `refresh` when they near their expiry or the store
// says they expired.
Result<std::shared_ptr<FileIO>> OpenVendedS3FileIO(const std::string& location,
                                                   const S3Config& base, const VendedS3& vended,
                                                   std::function<Result<VendedS3>()> refresh);

// The resolved settings of an S3 FileIO (nullopt for another kind): what `ferry catalog serve`
// can vend to its clients.
std::optional<S3Settings> S3SettingsOf(const FileIO& io);

}  // namespace ferry::lake
