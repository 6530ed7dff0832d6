"""Hooks for the cleaner and the transactions work: segment swap, aborted txn collection."""

from __future__ import annotations

from pathlib import Path

from logtest_helpers import fill, new_log, offsets_of, read_all

from kafkalite.log.fetch_data import AbortedTxn
from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_segment import CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX, LogSegment
from kafkalite.protocol.record_batch import iter_batch_positions

CFG = LogConfig(segment_bytes=300, file_delete_delay_ms=0)


def _cleaned_copy(lg, segments, keep, suffix=CLEANED_FILE_SUFFIX) -> LogSegment:
    """A segment holding only the batches whose base offset is in ``keep``."""
    first = segments[0]
    new = LogSegment.open(lg.dir, first.base_offset, lg.config, file_suffix=suffix)
    for seg in segments:
        data = seg.read_batch_bytes(0, seg.size)
        for pos, size in iter_batch_positions(data):
            batch = data[pos : pos + size]
            base = int.from_bytes(batch[:8], "big")
            if base in keep:
                new.append(base, -1, base, batch)
    new.flush()
    return new


def test_replace_segments(tmp_path: Path) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 12)
    lg.update_high_watermark(12)
    old = lg.segments[:2]
    upper = lg.segments[2].base_offset
    keep = {o for o in range(upper) if o % 2 == 0}
    new = _cleaned_copy(lg, old, keep)
    lg.replace_segments([new], old)
    assert lg.segments[0] is new and lg.segments[0].base_offset == 0
    assert read_all(lg) == [(o, o) for o in sorted(keep)] + [(o, o) for o in range(upper, 12)]
    d = tmp_path / "t-0"
    assert not list(d.glob("*" + CLEANED_FILE_SUFFIX)) and not list(d.glob("*" + SWAP_FILE_SUFFIX))
    # offsets of removed records resolve to the next surviving one (behaviour 37)
    assert offsets_of(lg.read(1, 10).read_bytes())[0] == (2, 2)
    lg.close()
    lg = new_log(tmp_path, CFG)
    lg.update_high_watermark(12)
    assert read_all(lg) == [(o, o) for o in sorted(keep)] + [(o, o) for o in range(upper, 12)]


def test_crash_during_swap_is_completed_at_load(tmp_path: Path) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 12)
    lg.update_high_watermark(12)
    old = lg.segments[:2]
    upper = lg.segments[2].base_offset
    keep = {o for o in range(upper) if o % 3 == 0}
    new = _cleaned_copy(lg, old, keep, suffix=SWAP_FILE_SUFFIX)
    new.close()
    lg.close()  # crash after the rename to .swap, before the old segments went
    lg = new_log(tmp_path, CFG, needs_recovery=True)
    lg.update_high_watermark(12)
    assert read_all(lg) == [(o, o) for o in sorted(keep)] + [(o, o) for o in range(upper, 12)]
    assert not list((tmp_path / "t-0").glob("*.swap"))


def test_collect_aborted_transactions_across_segments(tmp_path: Path) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 12)
    s0, s1 = lg.segments[0], lg.segments[1]
    s0.txn_index.append(AbortedTxn(1, 0, 2, 3))
    s1.txn_index.append(AbortedTxn(2, 3, s1.base_offset + 1, s1.base_offset + 2))
    got = lg.collect_aborted_transactions(1, 12)
    assert [t.producer_id for t in got] == [1, 2]
    assert [t.producer_id for t in lg.collect_aborted_transactions(0, 2)] == [1]
    assert lg.collect_aborted_transactions(s1.base_offset + 3, 12) == []
