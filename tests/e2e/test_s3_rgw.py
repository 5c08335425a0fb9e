"""The object-store tests of test_s3_warehouse.py against Ceph RGW 16 (started once for the
module: about 20-40 s): SQLite into an s3:// warehouse read back by icebird and DuckDB, `verify`,
`maintain` (compaction, expiry, orphan removal), a large file in parts, metadata never
overwritten, a crash at every fault point and inside a multipart upload, store faults through the
proxy, and check's errors for a wrong secret, an unknown key, a missing bucket and an
unreachable endpoint. (IAM permissions are moto's part: RGW has no user policies.)"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rgwserver  # noqa: E402
import test_s3_warehouse as base  # noqa: E402


def setUpModule():
    base.SERVER = rgwserver.start_for_module()


def tearDownModule():
    if base.SERVER:
        base.SERVER.stop()
        base.SERVER = None


class RgwSqliteTest(base.SqliteToS3Test):
    pass


class RgwCrashTest(base.S3CrashTest):
    pass


class RgwFaultTest(base.S3FaultTest):
    pass


class RgwCheckTest(base.S3CheckTest):
    test_a_user_who_may_not_write = None  # RGW has no IAM user policies


if __name__ == "__main__":
    unittest.main(verbosity=2)
