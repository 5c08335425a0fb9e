#!/usr/bin/env bash
# Full refresh into an s3:// warehouse on moto_server and on Ceph RGW, against the same sync into
# a local folder and against a bulk upload of the same files, in the same run. See
# docs/benchmarks.md.
#
# Usage: bench/s3.sh [--repeat N] [--rows N] [--chunk-rows N] [--stores moto,rgw] [--json FILE] [--keep]
#   --rows       rows of the benchmark table (default 5000000)
#   --chunk-rows the pipeline's chunk_rows (default: not set, chunks sized by bytes)
#   --stores     which stores (default moto,rgw; RGW takes ~40 s to start)
#   --repeat     runs of each measurement; medians are reported (default 3)
#   --json       where to write the results (default bench/results/s3-<time>.json)
#   --keep       keep the temporary folder
#   --upload-concurrency, --part-size-mb  the pipeline's s3.upload_concurrency and s3.part_size
#                (default 4 and 8), also the bulk upload's part size
#
# Needs moto and boto3 in python3 (the test suite's S3 server) and, for RGW, ceph-mon, ceph-osd
# and radosgw (scripts/setup.sh). Measures per store, each --repeat times:
#   local   ferry sync into a fresh local warehouse: wall time, peak RSS
#   s3      ferry sync into a fresh bucket (s3://bench-s3-N/wh): wall time, peak RSS
#   upload  boto3's transfer manager (what `aws s3 cp --recursive` uses) uploading the local
#           run's files to a fresh bucket, 8 MiB parts, 10 threads
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

args=()
while (($#)); do
  case "$1" in
    --repeat|--rows|--chunk-rows|--stores|--json|--upload-concurrency|--part-size-mb) (($# >= 2)) || die "$1 needs a value"; args+=("$1" "$2"); shift 2 ;;
    --keep) args+=("$1"); shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1" ;;
  esac
done
python3 -c "import moto, boto3" 2>/dev/null || die "moto and boto3 are missing in python3"
ensure_gnu_time
build_targets ferry
exec python3 "$bench_dir/s3_bench.py" --ferry "$build_dir/src/ferry/cli/ferry" --cpu "$(cpu_model)" \
  "${args[@]}"
