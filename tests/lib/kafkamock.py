"""A Kafka cluster for tests: ferry_kafka_mock (librdkafka's mock cluster in a process of its own,
brokers on 127.0.0.1 at ports the kernel picks), started once per test module and stopped by
PID. Topics are read back with kcat (Debian's), a client nobody here wrote.

The mock runs the transactional protocol (init, add partitions, commit, abort) but writes no
transaction markers: records of a transaction that never committed stay visible, whatever the
consumer's isolation.level. `committed_events` therefore keeps only the records whose
transaction (the `ferry.commit` header) also wrote a checkpoint record to the state topic: on a
real broker, read_committed gives exactly that set; here it is what the mock would show had it
aborted the others."""
import json
import os
import shutil
import signal
import subprocess
import time
import unittest

# Kafka API keys and error codes used with `errors`.
API_PRODUCE = 0
API_INIT_PRODUCER_ID = 22
API_ADD_PARTITIONS_TO_TXN = 24
API_END_TXN = 26
ERR_COORDINATOR_NOT_AVAILABLE = 15
ERR_NOT_COORDINATOR = 16
ERR_PRODUCER_FENCED = 90


def binary():
    return os.environ.get("FERRY_KAFKA_MOCK")


def available():
    b = binary()
    return bool(b) and os.path.exists(b) and shutil.which("kcat") is not None


class KafkaMock:
    def __init__(self, brokers=1):
        self.proc = subprocess.Popen([binary(), "--brokers", str(brokers)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "bootstrap":
            self.stop()
            raise RuntimeError(f"ferry_kafka_mock did not start: {line} {self.proc.stderr.read()}")
        self.bootstrap = line[1]

    def command(self, text):
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if answer != "ok":
            raise RuntimeError(f"mock cluster: {text}: {answer}")

    def topic(self, name, partitions):
        """Creates topic `name` (the mock keeps 5 MB a partition: big topics need many)."""
        self.command(f"topic {name} {partitions}")

    def errors(self, api, *codes):
        """The next requests of API `api` fail with `codes`, one each."""
        self.command(f"errors {api} " + " ".join(str(c) for c in codes))

    def clear(self, api):
        self.command(f"clear {api}")

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass

    # ---- reading with kcat ----
    def records(self, topic, timeout=60):
        """Every record of `topic` (read_committed), as dicts {partition, offset, key, value,
        commit}: `commit` is the id of the producer transaction that wrote it (the header
        `ferry.commit` of state records, the event's source.commit or __commit); [] when the
        topic does not exist."""
        p = subprocess.run(
            ["kcat", "-C", "-b", self.bootstrap, "-t", topic, "-e", "-q", "-J",
             "-X", "isolation.level=read_committed", "-X", "topic.metadata.refresh.interval.ms=100"],
            capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            if "Unknown topic" in p.stderr or "UNKNOWN_TOPIC" in p.stderr:
                return []
            raise RuntimeError(f"kcat -C -t {topic}: exit {p.returncode}: {p.stderr}")
        out = []
        for line in p.stdout.splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            h = r.get("headers") or []
            headers = dict(zip(h[0::2], h[1::2]))
            commit = headers.get("ferry.commit")
            if commit is None and r["payload"] is not None:
                v = json.loads(r["payload"])
                commit = v["source"]["commit"] if "source" in v else v.get("__commit")
            out.append({"partition": r["partition"], "offset": r["offset"], "key": r["key"],
                        "value": r["payload"], "commit": commit})
        out.sort(key=lambda r: (r["partition"], r["offset"]))
        # A tombstone has no value: it belongs to the transaction of the delete event just
        # before it in its partition (ferry produces the two one after the other).
        for prev, r in zip(out, out[1:]):
            if r["commit"] is None and r["value"] is None and prev["partition"] == r["partition"]:
                r["commit"] = prev["commit"]
        first = {}
        for r in out:
            first.setdefault(r["partition"], r["offset"])
        dropped = {p: o for p, o in first.items() if o != 0}
        if dropped:
            # The mock keeps at most 5 MB (or 100,000 batches) a partition, dropping the oldest.
            raise RuntimeError(f"the mock cluster dropped the first records of {topic} "
                               f"(partition: first offset {dropped}): give it more partitions")
        return out

    def checkpoints(self, pipeline, state_topic="ferry.checkpoints"):
        """The pipeline's checkpoint records: [(key, marker or None, commit id)] in log order
        (not its columns records, whose keys end in NUL "columns")."""
        return [(r["key"], json.loads(r["value"]) if r["value"] is not None else None,
                 r["commit"])
                for r in self.records(state_topic)
                if r["key"] is not None and r["key"].startswith(pipeline + "/")
                and "\x00" not in r["key"]]

    def committed_events(self, topic, pipeline, state_topic="ferry.checkpoints"):
        """The records of `topic` whose transaction committed (see the module's doc)."""
        done = {c for _, _, c in self.checkpoints(pipeline, state_topic)}
        return [r for r in self.records(topic) if r["commit"] in done]


def reduce_by_key(events):
    """{key text: after (dict)} of envelope events in log order: c/u/r set a key's row; d and
    tombstones remove it."""
    rows = {}
    for e in events:
        if e["value"] is None:
            rows.pop(e["key"], None)
            continue
        v = json.loads(e["value"])
        if v["op"] == "d":
            rows.pop(e["key"], None)
        else:
            rows[e["key"]] = v["after"]
    return rows


def duplicates(events):
    """Change events (not loads) that appear more than once: same key, op and source position."""
    seen, dups = set(), []
    for e in events:
        if e["value"] is None:
            continue
        v = json.loads(e["value"])
        if v["source"]["snapshot"]:
            continue
        ident = (e["key"], v["op"], v["source"]["position"])
        if ident in seen:
            dups.append(ident)
        seen.add(ident)
    return dups


def start_for_module(testcase_module=None):
    if not available():
        if os.environ.get("FERRY_REQUIRE_INTEROP"):
            raise RuntimeError("ferry_kafka_mock (FERRY_KAFKA_MOCK) or kcat is missing; "
                               "run scripts/setup.sh and build the tests")
        raise unittest.SkipTest("ferry_kafka_mock or kcat is missing")
    m = KafkaMock()
    time.sleep(0.1)
    return m
