"""The acceptance workload every stock client runs: keyed records with headers,
explicit timestamps, once per codec, then read back and compared byte for byte."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BASE_TS = 1_700_000_000_000


@dataclass(frozen=True)
class Rec:
    seq: int
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def make_records(codec: str, n: int) -> list[Rec]:
    ci = CODECS.index(codec)
    out = []
    for i in range(n):
        seq = ci * 1_000_000 + i
        digest = hashlib.sha256(f"{codec}:{i}".encode()).digest()
        value = digest * (1 + i % 5) + f"|{seq}".encode()
        out.append(
            Rec(
                seq,
                f"key-{i % 97}".encode(),
                value,
                (("seq", str(seq).encode()), ("codec", codec.encode()), ("bin", digest[:7])),
                BASE_TS + ci * 100_000 + i,
            )
        )
    return out


@dataclass
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int


def check_consumed(expected: list[Rec], got: list[Got], partitions: int) -> None:
    """Every record back exactly once, identical, and per partition delivered in
    order: as received (not sorted afterwards), offsets are dense and increasing
    and records come in the order they were produced."""
    by_seq = {r.seq: r for r in expected}
    assert len(got) == len(expected), f"consumed {len(got)} records, produced {len(expected)}"
    seen: set[int] = set()
    per_partition: dict[int, list[Got]] = {}
    for g in got:
        per_partition.setdefault(g.partition, []).append(g)
        hdrs = dict(g.headers)
        seq = int(hdrs["seq"])
        assert seq not in seen, f"record {seq} consumed twice"
        seen.add(seq)
        r = by_seq[seq]
        assert g.key == r.key
        assert g.value == r.value
        assert [(k, v) for k, v in g.headers] == list(r.headers)
        assert g.timestamp == r.timestamp
    assert set(per_partition) <= set(range(partitions))
    for p, recs in per_partition.items():
        offsets = [g.offset for g in recs]  # in delivery order
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), (
            f"partition {p}: offsets not delivered densely and in order"
        )
        seqs = [int(dict(g.headers)["seq"]) for g in recs]
        assert seqs == sorted(seqs), f"partition {p}: records delivered out of produce order"
