"""Offset lookups at the log end answered from the segment's last appended batches.

A consumer or follower at the log end asks for one of the last few batches; the
active segment remembers their positions instead of re-reading the file from the
last index entry. These tests check every lookup against the batches actually in
the file, across truncation, follower appends with offset gaps, rolls, reopening
and recovery: a hint left stale by any of them would return a wrong position.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logtest_helpers import new_log

from kafkalite.log.fetch_data import LogOffsetPosition
from kafkalite.log.log import Log
from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_segment import LogSegment
from kafkalite.protocol.record_batch import parse_header
from kafkalite.protocol.records import build_batch


def _batch(base: int, count: int, value_size: int = 10, extra_delta: int = 0) -> bytes:
    """``count`` records from ``base``; ``extra_delta`` widens the batch past its
    records, as compaction leaves them."""
    return build_batch(
        [(None, b"v" * value_size)] * count,
        base_offset=base,
        timestamp_ms=1_000,
        partition_leader_epoch=0,
        last_offset_delta=count - 1 + extra_delta,
    )


def _append(seg: LogSegment, batches: list[bytes]) -> None:
    data = b"".join(batches)
    last = parse_header(batches[-1]).last_offset
    seg.append(last, 1_000, last, data)


def _truth(seg: LogSegment, offset: int) -> LogOffsetPosition | None:
    """The batch holding ``offset`` or the first after it, from the file's contents."""
    for pos, h in seg.iter_batches(0):
        if h.last_offset >= offset:
            return LogOffsetPosition(h.last_offset, pos, h.size)
    return None


def _check_segment(seg: LogSegment, end: int) -> None:
    for offset in range(seg.base_offset, end + 3):
        expected = _truth(seg, offset)
        assert seg.translate_offset(offset) == expected, offset
        assert seg.scan_for_offset(offset) == expected, offset


def _log_truth(lg: Log, offset: int) -> tuple[int, int, bytes]:
    """(segment base, position, bytes) of the first batch a read at ``offset`` returns."""
    for seg in lg.segments:
        for pos, h in seg.iter_batches(0):
            if h.last_offset >= offset:
                return seg.base_offset, pos, seg.read_batch_bytes(pos, h.size)
    raise AssertionError(f"no batch holds {offset}")


def _check_log(lg: Log) -> None:
    """Every offset reads its batch, and its offset metadata (HW, LSO) points at it."""
    for offset in range(lg.log_start_offset, lg.log_end_offset):
        base, pos, batch = _log_truth(lg, offset)
        assert lg.read(offset, 1, min_one_message=True).read_bytes() == batch, offset
        meta = lg.offset_metadata(offset)
        assert (meta.segment_base_offset, meta.relative_position_in_segment) == (base, pos)


def test_truncated_batches_are_not_found_and_new_ones_are(tmp_path: Path) -> None:
    # no index entries: every lookup is the hints or a scan from position 0
    seg = LogSegment(tmp_path, 0, index_interval_bytes=1 << 20)
    _append(seg, [_batch(0, 5), _batch(5, 5, value_size=200), _batch(10, 5)])
    first_size = seg.size
    seg.truncate_to(5)
    assert 0 < seg.size < first_size
    for offset in range(5, 16):
        assert seg.translate_offset(offset) is None
        assert seg.read(offset, 1 << 20) is None
    _append(seg, [_batch(5, 1, value_size=500), _batch(6, 15, value_size=3)])
    _check_segment(seg, 20)
    info = seg.read(7, 1 << 20)
    assert info is not None
    assert info.read_bytes() == _batch(6, 15, value_size=3)


def test_truncation_to_the_segment_start_forgets_every_batch(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, 100)
    _append(seg, [_batch(100, 2), _batch(102, 2)])
    seg.truncate_to(100)
    assert seg.size == 0
    assert seg.translate_offset(100) is None
    assert seg.translate_offset(103) is None
    _append(seg, [_batch(100, 1, value_size=300)])
    _check_segment(seg, 101)


def test_follower_appends_with_offset_gaps_read_the_right_batches(tmp_path: Path) -> None:
    # a compacted leader sends batches with gaps between and inside them
    lg = new_log(tmp_path, LogConfig(segment_bytes=1500, index_interval_bytes=200))
    base = 0
    for i in range(40):
        count, gap, extra = 1 + i % 4, i % 3, (i % 5 == 0) * 2
        lg.append_as_follower(_batch(base, count, value_size=10 + 37 * (i % 7), extra_delta=extra))
        base += count + extra + gap
    assert lg.num_segments > 2
    _check_log(lg)
    for seg in lg.segments:
        _check_segment(seg, lg.log_end_offset)


def test_follower_truncation_then_appends_from_the_new_leader(tmp_path: Path) -> None:
    lg = new_log(tmp_path, LogConfig(index_interval_bytes=4096))
    for base in range(0, 30, 3):
        lg.append_as_follower(_batch(base, 3))
    lg.truncate_to(13)  # inside the batch 12..14: it goes too
    assert lg.log_end_offset == 12
    _check_log(lg)
    # the new leader's batches differ in size and boundaries from the truncated ones
    lg.append_as_follower(_batch(12, 1, value_size=400))
    lg.append_as_follower(_batch(13, 7, value_size=2))
    lg.append_as_follower(_batch(20, 2))
    assert lg.log_end_offset == 22
    _check_log(lg)
    _check_segment(lg.active_segment, 22)


def test_leader_appends_across_rolls_read_the_right_batches(tmp_path: Path) -> None:
    lg = new_log(tmp_path, LogConfig(segment_bytes=700))
    for i in range(30):
        lg.append_as_leader(bytearray(_batch(0, 1 + i % 3, value_size=5 + 40 * (i % 4))), 0)
    assert lg.num_segments > 3
    _check_log(lg)


def test_reopened_log_reads_the_right_batches(tmp_path: Path) -> None:
    cfg = LogConfig(index_interval_bytes=300)
    lg = new_log(tmp_path, cfg)
    for base in range(0, 40, 2):
        lg.append_as_follower(_batch(base, 2, value_size=base))
    lg.close()
    lg = new_log(tmp_path, cfg)  # clean: the active segment's end is scanned at load
    _check_log(lg)
    lg.append_as_follower(_batch(40, 3))
    _check_log(lg)
    path = lg.active_segment.log_path
    lg.close()
    for needs_recovery in (False, True):
        with open(path, "ab") as f:  # a torn write after the last batch
            f.write(b"\x00\x00\x00\x00\x00\x00\x00\x2b\x00\x00\x01")
        lg = new_log(tmp_path, cfg, needs_recovery=needs_recovery)  # the tail is recovered away
        assert lg.log_end_offset == 43 + needs_recovery
        _check_log(lg)
        lg.append_as_follower(_batch(lg.log_end_offset, 1, value_size=700))
        _check_log(lg)
        lg.close()


# ---------------------------------------------------------------- property

_APPEND = st.lists(
    st.tuples(
        st.integers(0, 3),  # gap before the batch
        st.integers(1, 5),  # records
        st.integers(0, 300),  # value size
        st.integers(0, 2),  # offsets past the last record (compaction)
    ),
    min_size=1,
    max_size=6,
)
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), _APPEND),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("reopen"), st.booleans()),
        st.tuples(st.just("corrupt"), st.floats(0, 1)),
    ),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_OPS, interval=st.sampled_from([0, 64, 300, 4096]))
def test_tail_hints_agree_with_the_scan(ops: list[tuple[str, object]], interval: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        seg = LogSegment(d, 10, index_interval_bytes=interval)
        next_offset = 10
        for op, arg in ops:
            if op == "append":
                batches = []
                for gap, count, value_size, extra in arg:  # type: ignore[attr-defined]
                    base = next_offset + gap
                    batches.append(_batch(base, count, value_size, extra))
                    next_offset = base + count + extra
                _append(seg, batches)
            elif op == "truncate":
                offset = 10 + int((next_offset - 10) * arg)  # type: ignore[operator]
                seg.truncate_to(offset)
                next_offset = seg.read_next_offset()
            elif op == "corrupt":
                # a bad CRC in some batch: recovery cuts the segment there, hints included
                batches = list(seg.iter_batches(0))
                if batches:
                    pos, h = batches[int(len(batches) * arg * 0.999)]  # type: ignore[operator]
                    with open(seg.log_path, "r+b") as f:
                        f.seek(pos + h.size - 1)
                        last_byte = f.read(1)[0]
                        f.seek(pos + h.size - 1)
                        f.write(bytes([last_byte ^ 0xFF]))
                    assert seg.recover() > 0
                    seg.resize_indexes(10_485_760)
                    next_offset = seg.read_next_offset()
            else:
                seg.close()
                seg = LogSegment(d, 10, index_interval_bytes=interval)
                if arg:
                    seg.recover()  # as after an unclean shutdown
                else:
                    seg.scan_end()  # as a clean load does
                seg.resize_indexes(10_485_760)  # active again, as Log's load makes it
            _check_segment(seg, next_offset)
        seg.close()
