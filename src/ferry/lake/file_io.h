// FileIO: the one way ferry reaches the files of a warehouse (data and delete files, manifests,
// manifest lists, metadata JSON). Nothing else opens them: table scans, compaction, snapshot
// expiry and the Iceberg sink all go through the FileIO their table was loaded with, and the
// format readers and writers see only the streams it hands out (base/io.h).
//
// Locations. Every call takes an absolute location URI, the form Iceberg metadata records:
// "file:///abs/path" for a local file (a bare "/abs/path" and Java's "file:/abs/path" are read
// too), "s3://bucket/key" for an object. Locations are built by appending names to a table's
// location ("<table>/data/<name>.parquet", JoinLocation), never from local paths.
//
// The model is an object store's, so that one fits behind it unchanged:
//   - reads open a file of known size and read ranges of it (offset, length);
//   - writes are a sequential stream that becomes visible, complete, only when Close() succeeds
//     (an atomic put; the local implementation writes a temporary name, fsyncs, and renames it
//     into place without replacing anything); a stream dropped before that leaves nothing;
//   - listing is by prefix of the location, deletion and size are by location.
//
// Errors: kNotFound (no such file), kAlreadyExists (a new file's location is taken),
// kPermissionDenied, kIOError (the storage failed the call); kInvalidArgument for a location
// this FileIO does not serve (another scheme).
// Thread-safety: a FileIO is safe to share between threads; each stream or file it returns is
// used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/io.h"
#include "ferry/base/status.h"
#include "ferry/lake/s3_settings.h"

namespace ferry::lake {

struct FileInfo {
  std::string location;  // a URI
  uint64_t size_bytes = 0;
  int64_t modified_ms = 0;  // last written, ms since the Unix epoch (from List; 0 if unknown)
};

class FileIO {
 public:
  virtual ~FileIO() = default;

  // What messages call this storage ("local files").
  virtual std::string Describe() const = 0;

  // Opens a file for reads by range. `size_bytes`: its size when the caller knows it (a manifest
  // entry's file_size_bytes), which spares an object store a request; the local implementation
  // reads the size from the file. kNotFound when it does not exist.
  virtual Result<std::unique_ptr<RandomAccessFile>> OpenFile(
      const std::string& location, std::optional<uint64_t> size_bytes = std::nullopt) = 0;
  // The whole of a small file (metadata JSON, a manifest). kNotFound when it does not exist.
  virtual Result<std::string> Read(const std::string& location) = 0;

  // When a new file's bytes are durable.
  enum class Durability {
    kOnClose,    // Close() returns once the file is durable (metadata, manifests)
    kOnPersist,  // Close() places the file complete; it is durable once Persist() has named it
                 // (data files: one flush for all the files a commit adds)
  };
  // A new file written as a stream. It appears at `location` only when the stream's Close()
  // succeeds, complete (and durable, unless `durability` defers that to Persist); a stream
  // destroyed before that leaves nothing behind. kAlreadyExists when the location is taken: here
  // when it already is, or from Close() when another writer put the file meanwhile (that
  // writer's file stays).
  virtual Result<std::unique_ptr<OutputStream>> NewFile(const std::string& location,
                                                        Durability durability) = 0;
  Result<std::unique_ptr<OutputStream>> NewFile(const std::string& location) {
    return NewFile(location, Durability::kOnClose);
  }
  // Makes durable the files written with Durability::kOnPersist at `locations` (closed; a
  // commit calls it before any metadata names them). An object store's files are durable when
  // their upload completes; the local implementation syncs them (SyncFiles: one syncfs for
  // many files of one file system).
  virtual Status Persist(const std::vector<std::string>& locations) {
    (void)locations;
    return Status::OK();
  }
  // Writes a whole small file that must not exist yet (NewFile, Append, Close).
  Status WriteNew(const std::string& location, std::string_view data);

  // The files whose location starts with `prefix` ("<table>/data/" lists a folder's files and
  // those below it), sorted by location.
  virtual Result<std::vector<FileInfo>> List(const std::string& prefix) = 0;
  // Deletes the file; OK when it does not exist.
  virtual Status Delete(const std::string& location) = 0;
  // The file's size; kNotFound when it does not exist.
  virtual Result<FileInfo> Stat(const std::string& location) = 0;
  // Aborts the uploads of new files under `prefix` that were begun before `before_ms` and never
  // completed (an object store's open multipart uploads, left by a killed writer); returns how
  // many. The local implementation has none: a dead writer's temporary files are listed files.
  virtual Result<int64_t> AbortUploadsBegunBefore(const std::string& prefix, int64_t before_ms) {
    (void)prefix;
    (void)before_ms;
    return int64_t{0};
  }
  // Whether the file exists (an error of the storage reads as "no").
  bool Exists(const std::string& location);
};

// The FileIO for a warehouse or table location, chosen by its scheme: "file" (and a bare
// absolute path) is served by the local implementation, "s3" (and "s3a") by the S3 one
// (s3_file_io.h) with the settings `s3` and the environment give (ResolveS3Settings: its errors).
// Any other scheme (gs, abfss, hdfs, ...) is kInvalidArgument naming the scheme and what to use
// instead.
Result<std::shared_ptr<FileIO>> OpenFileIO(const std::string& location, const S3Config& s3 = {});

// Proves that the storage at `location` (a warehouse) takes what a sync does to it: lists the
// location, writes a probe file "<location>/.ferry-probe-<uuid>", reads it back and deletes it.
// The first failure is returned with the step that failed ("writing the probe file ..."), its
// code kept (kPermissionDenied, kNotFound for a missing bucket, kUnavailable, ...). Nothing is
// left behind when it succeeds.
Status ProbeStorage(FileIO& io, const std::string& location);

// The local implementation (one instance, shared). Production code gets it from OpenFileIO.
std::shared_ptr<FileIO> LocalFileIO();

// The scheme of a location URI, lower-cased ("s3" for "s3://b/k"); empty for a path.
std::string SchemeOf(const std::string& location);
// "<base>/<name>": `name` is relative ("data/x.parquet"); one '/' between them.
std::string JoinLocation(std::string_view base, std::string_view name);
// "/a/b" -> "file:///a/b"; URIs pass through.
std::string ToUri(const std::string& path_or_uri);
// The path of a local location: "file:///a/b", "file:/a/b" or "/a/b" -> "/a/b".
// kInvalidArgument for another scheme or a path that is not absolute.
Result<std::string> LocalPath(const std::string& uri);

}  // namespace ferry::lake
