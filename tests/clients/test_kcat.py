"""kcat (Debian's, on librdkafka 2.0.2) against a real kafkalite broker.

kcat is the old-client check: it negotiates with ApiVersions and uses the
older request versions librdkafka 2.0 knows. It has no admin commands, so the
topic is auto-created (num.partitions=3) and configs are not altered here.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.clients.workload import CODECS

pytestmark = pytest.mark.skipif(
    shutil.which("kcat") is None, reason="Debian package kcat is not installed"
)

N = 10_000


def _kcat(*args, input=None, timeout=60):
    return subprocess.run(
        ["kcat", *args], input=input, capture_output=True, timeout=timeout, check=True
    )


def test_kcat_produce_consume_every_codec_and_query_offsets(kafka_broker_factory):
    b = kafka_broker_factory(**{"num.partitions": 3})
    bs = b.bootstrap_servers
    topic = "kcat-lifecycle"
    expected = {}
    for ci, codec in enumerate(CODECS):
        lines = []
        for i in range(N):
            seq = ci * 1_000_000 + i
            key = f"key-{i % 97}"
            value = f"{codec}-value-{seq}-" + "x" * (i % 50)
            expected[seq] = (key, value, codec)
            lines.append(f"{key}\t{value}")
        _kcat(
            "-b",
            bs,
            "-P",
            "-t",
            topic,
            "-K",
            "\t",
            "-z",
            codec,
            "-H",
            f"codec={codec}",
            "-X",
            "linger.ms=5",
            input=("\n".join(lines) + "\n").encode(),
        )

    out = _kcat("-b", bs, "-C", "-t", topic, "-o", "beginning", "-e", "-J").stdout.decode()
    got = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(got) == len(expected)
    per_partition = {}
    seen = set()
    for m in got:
        key, value = m["key"], m["payload"]
        seq = int(value.split("-")[2])
        assert seq not in seen
        seen.add(seq)
        assert (key, value) == expected[seq][:2]
        assert m["headers"] == ["codec", expected[seq][2]]
        per_partition.setdefault(m["partition"], []).append((m["offset"], seq, m["ts"]))
    assert set(per_partition) == {0, 1, 2}
    for recs in per_partition.values():
        offsets = [o for o, _, _ in recs]
        assert offsets == list(range(len(offsets)))
        seqs = [s for _, s, _ in recs]
        assert seqs == sorted(seqs)

    # kcat -Q: offsets by timestamp (librdkafka ListOffsets)
    p0 = per_partition[0]
    mid_offset, _, mid_ts = p0[len(p0) // 2]
    q = _kcat("-b", bs, "-Q", "-t", f"{topic}:0:{mid_ts}").stdout.decode()
    found = int(q.strip().split("offset")[-1].strip().split()[0])
    first_with_ts = min(o for o, _, ts in p0 if ts >= mid_ts)
    assert found == first_with_ts

    # kcat -Q with the special timestamps: -2 earliest, -1 latest
    for spec, want in ((-2, 0), (-1, len(p0))):
        q = _kcat("-b", bs, "-Q", "-t", f"{topic}:0:{spec}").stdout.decode()
        assert int(q.strip().split("offset")[-1].strip().split()[0]) == want

    # metadata listing sees 3 partitions with this broker as leader
    meta = json.loads(_kcat("-b", bs, "-L", "-J", "-t", topic).stdout)
    [t] = [t for t in meta["topics"] if t["topic"] == topic]
    assert len(t["partitions"]) == 3
    assert all(p["leader"] == meta["controllerid"] for p in t["partitions"])
