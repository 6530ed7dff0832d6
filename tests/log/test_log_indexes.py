"""Offset/time/transaction indexes and the leader epoch cache, in isolation."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkalite.log.abstract_index import CorruptIndexError, IndexOffsetOverflowError
from kafkalite.log.checkpoint import CorruptCheckpointError
from kafkalite.log.fetch_data import AbortedTxn
from kafkalite.log.leader_epoch_cache import EpochEntry, LeaderEpochFileCache
from kafkalite.log.offset_index import OffsetIndex, OffsetPosition
from kafkalite.log.time_index import TimeIndex, TimestampOffset
from kafkalite.log.transaction_index import TransactionIndex


def test_offset_index_lookup_and_truncate(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "x.index", 100, 80)
    assert idx.max_entries == 10 and idx.entries == 0
    assert idx.lookup(150) == OffsetPosition(100, 0)
    for i in range(1, 11):
        idx.append(100 + 10 * i, 1000 * i)
    assert idx.is_full
    with pytest.raises(CorruptIndexError):
        idx.append(300, 1)
    assert idx.lookup(99) == OffsetPosition(100, 0)
    assert idx.lookup(110) == OffsetPosition(110, 1000)
    assert idx.lookup(119) == OffsetPosition(110, 1000)
    assert idx.lookup(10**9) == OffsetPosition(200, 10000)
    assert idx.fetch_upper_bound_offset(OffsetPosition(110, 1000), 2500) == OffsetPosition(
        140, 4000
    )
    idx.truncate_to(135)
    assert idx.entries == 3 and idx.last_offset == 130
    idx.truncate_to(130)
    assert idx.entries == 2
    with pytest.raises(CorruptIndexError):
        idx.append(115, 5)
    idx.close()
    assert (tmp_path / "x.index").read_bytes() == struct.pack(">iiii", 10, 1000, 20, 2000)
    again = OffsetIndex(tmp_path / "x.index", 100, 80)
    assert again.entries == 2 and again.lookup(125) == OffsetPosition(120, 2000)
    again.sanity_check(log_size=2000)
    with pytest.raises(CorruptIndexError):
        again.sanity_check(log_size=1999)


def test_offset_index_rejects_overflow(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "x.index", 0, 80)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(2**31, 0)


def test_offset_index_sanity_detects_zero_tail(tmp_path: Path) -> None:
    p = tmp_path / "y.index"
    p.write_bytes(struct.pack(">ii", 5, 100) + b"\x00" * 80)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(p, 0, 800).sanity_check()


def test_time_index(tmp_path: Path) -> None:
    ti = TimeIndex(tmp_path / "x.timeindex", 50, 60)
    assert ti.max_entries == 5
    assert ti.last_entry == TimestampOffset(-1, 50)
    assert ti.lookup(10**12) == TimestampOffset(-1, 50)
    ti.maybe_append(1000, 55)
    ti.maybe_append(1000, 56)  # same timestamp: skipped
    ti.maybe_append(2000, 60)
    ti.maybe_append(3000, 70)
    assert ti.entries == 3
    ti.maybe_append(4000, 80)
    assert ti.is_full  # one slot is kept for the roll
    with pytest.raises(CorruptIndexError):
        ti.maybe_append(5000, 90)
    ti.maybe_append(5000, 90, skip_full_check=True)
    assert ti.entries == 5
    with pytest.raises(CorruptIndexError):
        ti.maybe_append(6000, 10, skip_full_check=True)  # offset going backwards
    assert ti.lookup(999) == TimestampOffset(-1, 50)
    assert ti.lookup(2500) == TimestampOffset(2000, 60)
    assert ti.lookup(3000) == TimestampOffset(3000, 70)
    ti.truncate_to(70)
    assert ti.entries == 2 and ti.last_entry == TimestampOffset(2000, 60)
    ti.close()
    assert (tmp_path / "x.timeindex").read_bytes() == struct.pack(">qiqi", 1000, 5, 2000, 10)


def test_time_index_sanity(tmp_path: Path) -> None:
    p = tmp_path / "t.timeindex"
    p.write_bytes(struct.pack(">qi", 1000, 1) + struct.pack(">qi", 0, 0))
    with pytest.raises(CorruptIndexError):
        TimeIndex(p, 0).sanity_check()
    p.write_bytes(b"\x00" * 13)
    with pytest.raises(CorruptIndexError):
        TimeIndex(p, 0).sanity_check()


def test_transaction_index(tmp_path: Path) -> None:
    p = tmp_path / "x.txnindex"
    ti = TransactionIndex(p, 0)
    assert not p.exists()  # created lazily, like Kafka
    ti.append(AbortedTxn(7, 0, 10, 11))
    ti.append(AbortedTxn(8, 5, 20, 21))
    ti.append(AbortedTxn(9, 25, 30, 40))
    assert p.read_bytes()[:34] == struct.pack(">hqqqq", 0, 7, 0, 10, 11)
    assert p.stat().st_size == 102
    r = ti.collect_aborted_txns(12, 22)
    assert [t.producer_id for t in r.aborted] == [
        8
    ] and r.is_complete is True  # pid 9's LSO 40 >= 22
    r = ti.collect_aborted_txns(12, 50)
    assert [t.producer_id for t in r.aborted] == [8, 9] and r.is_complete is False
    r = ti.collect_aborted_txns(0, 11)
    assert [t.producer_id for t in r.aborted] == [7] and r.is_complete is True
    with pytest.raises(ValueError):
        ti.append(AbortedTxn(1, 0, 29, 29))
    ti.truncate_to(20)
    assert [t.producer_id for t in ti.all_aborted_txns()] == [7]
    ti.close()
    again = TransactionIndex(p, 0)
    again.sanity_check()
    with pytest.raises(CorruptIndexError):
        TransactionIndex(p, 100).sanity_check()


def test_leader_epoch_cache_assign_rules(tmp_path: Path) -> None:
    c = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    assert c.latest_epoch is None and c.end_offset_for(0, 10) == (-1, -1)
    assert c.assign(0, 0)
    assert not c.assign(0, 5)  # same epoch, later offset: no change
    assert c.assign(2, 10)
    assert c.assign(3, 20)
    assert c.assign(1, 15)  # older epoch: entries it contradicts go
    assert c.entries() == [EpochEntry(0, 0), EpochEntry(1, 15)]
    assert c.assign(4, 30)
    assert (
        c.epoch_for_offset(14) == 0 and c.epoch_for_offset(15) == 1 and c.epoch_for_offset(99) == 4
    )
    assert LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint").entries() == c.entries()
    with pytest.raises(ValueError):
        c.assign(-1, 0)


def test_leader_epoch_end_offsets(tmp_path: Path) -> None:
    c = LeaderEpochFileCache(None)
    for e, o in ((1, 0), (3, 10), (6, 25)):
        c.assign(e, o)
    assert c.end_offset_for(6, 40) == (6, 40)
    assert c.end_offset_for(3, 40) == (3, 25)
    assert c.end_offset_for(4, 40) == (3, 25)
    assert c.end_offset_for(0, 40) == (0, 0)
    assert c.end_offset_for(7, 40) == (-1, -1)
    assert c.end_offset_for(-1, 40) == (-1, -1)


def test_leader_epoch_truncation(tmp_path: Path) -> None:
    c = LeaderEpochFileCache(tmp_path / "e")
    for e, o in ((1, 0), (3, 10), (6, 25)):
        c.assign(e, o)
    c.truncate_from_end(25)
    assert c.entries() == [EpochEntry(1, 0), EpochEntry(3, 10)]
    c.truncate_from_start(12)
    assert c.entries() == [EpochEntry(3, 12)]
    c.truncate_from_start(5)
    assert c.entries() == [EpochEntry(3, 12)]
    assert (tmp_path / "e").read_text() == "0\n1\n3 12\n"


def test_corrupt_checkpoint(tmp_path: Path) -> None:
    p = tmp_path / "e"
    for text in ("1\n0\n", "0\n2\n1 0\n", "0\n1\n1\n", "zz"):
        p.write_text(text)
        with pytest.raises(CorruptCheckpointError):
            LeaderEpochFileCache(p)


def _vm_flags_of_mapping(path: Path) -> list[str]:
    """VmFlags of this process's mapping of ``path`` (from /proc/self/smaps)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    inside = False
    for line in lines:
        if line.split()[-1:] == [str(path)]:
            inside = True
        elif inside and line.startswith("VmFlags:"):
            return line.split()[1:]
    raise AssertionError(f"{path} is not mapped")


@pytest.mark.parametrize("kind", ["offset", "time"])
def test_index_mapping_reads_no_ahead(tmp_path: Path, kind: str) -> None:
    """A fresh preallocated (sparse) index is mapped MADV_RANDOM ("rr"): the first store
    into it must not make the kernel read ahead megabytes of holes on the event loop."""
    if kind == "offset":
        idx: OffsetIndex | TimeIndex = OffsetIndex(tmp_path / "a.index", 0, 10 * 1024 * 1024)
        idx.append(10, 4096)  # type: ignore[union-attr]
    else:
        idx = TimeIndex(tmp_path / "a.timeindex", 0, 10 * 1024 * 1024)
        idx.maybe_append(1000, 10)  # type: ignore[union-attr]
    assert idx.is_mapped
    assert "rr" in _vm_flags_of_mapping(idx.path)
    assert "sr" not in _vm_flags_of_mapping(idx.path)
    idx.close()


def test_transaction_index_file_bytes(tmp_path: Path) -> None:
    """Every entry byte for byte: version int16 0, producerId, firstOffset, lastOffset,
    lastStableOffset (int64 each, big-endian), as Kafka's TransactionIndex writes them."""
    p = tmp_path / "00000000000000000100.txnindex"
    ti = TransactionIndex(p, 100)
    entries = [(7, 100, 110, 111), (8, 105, 120, 121), (2**40 + 3, 125, 130, 140)]
    for pid, first, last, lso in entries:
        ti.append(AbortedTxn(pid, first, last, lso))
    ti.close()
    expected = b"".join(
        b"\x00\x00" + b"".join(v.to_bytes(8, "big", signed=True) for v in e) for e in entries
    )
    assert p.read_bytes() == expected
    again = TransactionIndex(p, 100)
    assert [
        (t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
        for t in again.all_aborted_txns()
    ] == entries
    again.close()
