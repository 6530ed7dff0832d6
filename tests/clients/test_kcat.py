"""kcat (Debian's, on librdkafka 2.0.2) against a real kafkalite broker.

kcat is the old-client check: it negotiates with ApiVersions and uses the
older request versions librdkafka 2.0 knows. It has no admin commands, so the
topic is auto-created (num.partitions=3) and configs are not altered here.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time

import pytest

from kafkalite.protocol.record_batch import iter_headers
from tests.clients.workload import CODEC_IDS, CODECS

pytestmark = pytest.mark.skipif(
    shutil.which("kcat") is None, reason="Debian package kcat is not installed"
)

N = 10_000
# kcat splits stdin on these; the binary keys and values never contain them
MSG_DELIM, KEY_DELIM = 0x1E, 0x1F
_NO_DELIMS = bytes.maketrans(bytes([MSG_DELIM, KEY_DELIM]), b"\x20\x21")


def _kcat(*args, input=None, timeout=60):
    return subprocess.run(
        ["kcat", *args], input=input, capture_output=True, timeout=timeout, check=True
    )


def _binary(seed: bytes, n: int) -> bytes:
    out = b""
    while len(out) < n:
        out += hashlib.sha256(seed + len(out).to_bytes(4, "big")).digest()
    return out[:n].translate(_NO_DELIMS)


def _parse_kcat_format(out: bytes) -> list[tuple[int, int, int, bytes | None, bytes | None, list]]:
    """Records printed with -f '%p %o %T %K %S %h\\n%k%s' (lengths make it binary-safe)."""
    recs = []
    pos = 0
    while pos < len(out):
        nl = out.index(b"\n", pos)
        p, o, ts, klen, vlen, *hdr = out[pos:nl].split(b" ", 5)
        pos = nl + 1
        klen, vlen = int(klen), int(vlen)
        key = None if klen < 0 else out[pos : pos + klen]
        pos += max(klen, 0)
        value = None if vlen < 0 else out[pos : pos + vlen]
        pos += max(vlen, 0)
        headers = [tuple(h.split(b"=", 1)) for h in hdr[0].split(b",")] if hdr and hdr[0] else []
        recs.append((int(p), int(o), int(ts), key, value, headers))
    return recs


def _stored_codecs(broker, topic: str, partition: int) -> dict[int, int]:
    """offset -> compression codec id of the batch holding it, read from the broker's log."""
    log = broker.kafka.replica_manager.get_partition((topic, partition)).log
    data = log.read(0, 1 << 30, max_offset=None).records
    raw = data if isinstance(data, bytes | bytearray) else data.read_bytes()
    return {
        off: h.compression
        for _, h in iter_headers(raw)
        for off in range(h.base_offset, h.last_offset + 1)
    }


def test_kcat_produce_consume_every_codec_and_query_offsets(kafka_broker_factory):
    b = kafka_broker_factory(**{"num.partitions": 3})
    bs = b.bootstrap_servers
    topic = "kcat-lifecycle"
    expected = {}
    windows = {}
    for ci, codec in enumerate(CODECS):
        chunks = []
        for i in range(N):
            seq = ci * 1_000_000 + i
            key = b"k\x00" + _binary(b"key%d" % (i % 97), 1 + i % 13)
            # binary but compressible: librdkafka sends a batch uncompressed when the
            # codec does not make it smaller
            value = (
                f"{seq:08d}|".encode()
                + _binary(f"{codec}:{i}".encode(), 1 + i % 16) * 3
                + b"\x00\n\xff" * (i % 20)
            )
            expected[seq] = (key, value, codec)
            chunks.append(key + bytes([KEY_DELIM]) + value)
        start = int(time.time() * 1000)
        _kcat(
            "-b",
            bs,
            "-P",
            "-t",
            topic,
            "-D",
            "\\x1e",
            "-K",
            "\\x1f",
            "-z",
            codec,
            "-H",
            f"codec={codec}",
            "-H",
            f"run={ci}",
            "-H",
            b"bin=\xff\x80\x01",
            "-H",
            "empty=",
            "-X",
            "linger.ms=5",
            input=bytes([MSG_DELIM]).join(chunks) + bytes([MSG_DELIM]),
        )
        windows[codec] = (start, int(time.time() * 1000))

    out = _kcat(
        "-b", bs, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%p %o %T %K %S %h\\n%k%s"
    ).stdout
    got = _parse_kcat_format(out)
    assert len(got) == len(expected)
    stored = {p: _stored_codecs(b, topic, p) for p in range(3)}
    per_partition: dict[int, list[tuple[int, int, int]]] = {}
    seen = set()
    stored_with: dict[str, int] = {}
    for p, offset, ts, key, value, headers in got:
        seq = int(value[:8])
        assert seq not in seen
        seen.add(seq)
        exp_key, exp_value, codec = expected[seq]
        assert (key, value) == (exp_key, exp_value)  # binary, byte for byte
        assert headers == [
            (b"codec", codec.encode()),
            (b"run", str(CODECS.index(codec)).encode()),
            (b"bin", b"\xff\x80\x01"),
            (b"empty", b""),
        ]
        # stored with the codec the producer used (read from the broker's own log),
        # or uncompressed: librdkafka sends a batch as is when compressing does not
        # shrink it (a lone record when linger expires under load)
        assert stored[p][offset] in (CODEC_IDS[codec], 0), (seq, codec)
        stored_with[codec] = stored_with.get(codec, 0) + (stored[p][offset] != 0)
        # CreateTime set by kcat while that run was producing
        lo, hi = windows[codec]
        assert lo - 1000 <= ts <= hi + 1000, (ts, lo, hi)
        per_partition.setdefault(p, []).append((offset, seq, ts))
    # the bulk of every run went through its codec
    for codec in CODECS:
        if CODEC_IDS[codec]:
            assert stored_with.get(codec, 0) >= N // 2, (codec, stored_with)
    assert set(per_partition) == {0, 1, 2}
    for recs in per_partition.values():  # as delivered, not sorted
        offsets = [o for o, _, _ in recs]
        assert offsets == list(range(len(offsets)))
        seqs = [s for _, s, _ in recs]
        assert seqs == sorted(seqs)
    assert {c for codes in stored.values() for c in codes.values()} == set(CODEC_IDS.values())

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
