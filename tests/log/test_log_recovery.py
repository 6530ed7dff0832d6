"""Recovery after a crash: truncate exactly at the first bad batch, keep the rest."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from logtest_helpers import fill, make_batch, new_log, read_all

from kafkalite.log.log import Log
from kafkalite.log.log_config import LogConfig

CFG = LogConfig(segment_bytes=1500, index_interval_bytes=100)


def _crashed_log(tmp_path: Path, batches: int = 12) -> tuple[Path, list[int]]:
    """A log left without close(): indexes untrimmed, as after kill -9."""
    lg = new_log(tmp_path, CFG)
    ends = []
    for i in range(batches):
        lg.append_as_leader(make_batch(2, value_size=40, timestamp=1000 + i), 3)
        ends.append(lg.active_segment.size)
    assert lg.num_segments >= 2
    lg.close_handlers()  # no trim, no marker
    return tmp_path / "t-0", ends


def _last_segment(d: Path) -> Path:
    return sorted(d.glob("*.log"))[-1]


def _reopen(tmp_path: Path, **kw: object) -> Log:
    lg = new_log(tmp_path, CFG, needs_recovery=True, **kw)
    lg.update_high_watermark(lg.log_end_offset)
    return lg


def test_torn_write_mid_batch(tmp_path: Path) -> None:
    d, _ = _crashed_log(tmp_path)
    seg = _last_segment(d)
    size = seg.stat().st_size
    os.truncate(seg, size - 17)
    lg = _reopen(tmp_path)
    assert lg.log_end_offset == 22
    assert lg.recovery_truncated_bytes == size - 17 - lg.active_segment.size
    assert seg.stat().st_size == lg.active_segment.size
    assert read_all(lg) == [(2 * i, 2 * i + 1) for i in range(11)]
    # appends continue at the right offset
    assert lg.append_as_leader(make_batch(1), 3).first_offset == 22


def test_flipped_byte_in_last_batch(tmp_path: Path) -> None:
    d, _ = _crashed_log(tmp_path)
    seg = _last_segment(d)
    data = bytearray(seg.read_bytes())
    data[-5] ^= 0x40
    seg.write_bytes(data)
    lg = _reopen(tmp_path)
    assert lg.log_end_offset == 22
    assert read_all(lg) == [(2 * i, 2 * i + 1) for i in range(11)]


def test_flipped_byte_in_middle_drops_everything_after(tmp_path: Path) -> None:
    d, _ = _crashed_log(tmp_path)
    segs = sorted(d.glob("*.log"))
    first = segs[0]
    data = bytearray(first.read_bytes())
    # corrupt the third batch of the first segment (each batch is the same size)
    batch = struct.unpack_from(">i", data, 8)[0] + 12
    data[2 * batch + 70] ^= 0x01
    first.write_bytes(data)
    lg = _reopen(tmp_path)
    assert lg.log_end_offset == 4
    assert lg.num_segments == 1
    assert sorted(p.name for p in d.glob("*.log")) == [first.name]
    assert read_all(lg) == [(0, 1), (2, 3)]


def test_garbage_appended(tmp_path: Path) -> None:
    d, _ = _crashed_log(tmp_path)
    seg = _last_segment(d)
    good = seg.read_bytes()
    with open(seg, "ab") as f:
        f.write(b"\x00" * 7 + b"\xff" * 100)
    lg = _reopen(tmp_path)
    assert lg.log_end_offset == 24
    assert seg.read_bytes() == good
    assert lg.recovery_truncated_bytes == 107


def test_garbage_with_plausible_header(tmp_path: Path) -> None:
    d, _ = _crashed_log(tmp_path)
    seg = _last_segment(d)
    good = seg.read_bytes()
    last_batch = good[-(struct.unpack_from(">i", good, 8)[0] + 12) :]
    fake = bytearray(last_batch)
    fake[0:8] = struct.pack(">q", 24)
    fake[30] ^= 0x10  # valid length and magic, bad CRC
    with open(seg, "ab") as f:
        f.write(fake)
    lg = _reopen(tmp_path)
    assert lg.log_end_offset == 24
    assert seg.read_bytes() == good


def test_recovery_rebuilds_untrimmed_indexes(tmp_path: Path) -> None:
    d, _ = _crashed_log(tmp_path)
    active_index = sorted(d.glob("*.index"))[-1]
    assert active_index.stat().st_size == CFG.segment_index_bytes  # preallocated, zero tail
    lg = _reopen(tmp_path)
    for off in range(0, 24):
        assert read_all(lg, off)[0][0] == off - off % 2
    lg.close()
    assert active_index.stat().st_size < 100


def test_clean_shutdown_skips_recovery(tmp_path: Path) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 5)
    lg.close()
    seg = _last_segment(tmp_path / "t-0")
    data = bytearray(seg.read_bytes())
    data[-5] ^= 0x40  # bad CRC: only a recovery would notice
    seg.write_bytes(data)
    lg = new_log(tmp_path, CFG, needs_recovery=False)
    assert lg.recovery_truncated_bytes == 0
    assert lg.log_end_offset == 5
    assert seg.read_bytes() == data
    lg.close_handlers()
    lg = new_log(tmp_path, CFG, needs_recovery=True)
    assert lg.log_end_offset == 4


def test_partial_tail_is_recovered_even_after_clean_shutdown(tmp_path: Path) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 5)
    lg.close()
    seg = _last_segment(tmp_path / "t-0")
    good = seg.read_bytes()
    with open(seg, "ab") as f:
        f.write(b"junk" * 10)
    lg = new_log(tmp_path, CFG, needs_recovery=False)
    assert lg.recovery_truncated_bytes == 40
    assert seg.read_bytes() == good
    assert lg.append_as_leader(make_batch(1), 0).first_offset == 5


def test_recovery_point_limits_recovered_segments(tmp_path: Path) -> None:
    d, _ = _crashed_log(tmp_path)
    segs = sorted(d.glob("*.log"))
    first = segs[0]
    data = bytearray(first.read_bytes())
    data[-3] ^= 0xFF  # corrupt, but below the recovery point
    first.write_bytes(data)
    second_base = int(segs[1].name.split(".")[0])
    lg = _reopen(tmp_path, recovery_point=second_base)
    assert lg.log_end_offset == 24  # the first segment was not re-validated


def test_missing_index_is_rebuilt(tmp_path: Path) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 30, value_size=30)
    lg.close()
    d = tmp_path / "t-0"
    idx = sorted(d.glob("*.index"))[0]
    original = idx.read_bytes()
    idx.unlink()
    (d / "00000000000000000099.index").write_bytes(b"orphan")
    lg = new_log(tmp_path, CFG)
    assert not (d / "00000000000000000099.index").exists()
    lg.update_high_watermark(lg.log_end_offset)
    assert read_all(lg) == [(i, i) for i in range(30)]
    lg.close()
    assert idx.read_bytes() == original


def test_corrupt_index_is_rebuilt(tmp_path: Path) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 30, value_size=30)
    lg.close()
    idx = sorted((tmp_path / "t-0").glob("*.index"))[0]
    original = idx.read_bytes()
    idx.write_bytes(original + b"\x00\x00\x00")  # not a multiple of 8
    lg = new_log(tmp_path, CFG)
    lg.close()
    assert idx.read_bytes() == original


def test_deleted_and_cleaned_leftovers_are_removed(tmp_path: Path) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 3)
    lg.close()
    d = tmp_path / "t-0"
    for name in (
        "00000000000000000000.log.deleted",
        "00000000000000000007.log.cleaned",
        "x.index.swap",
    ):
        (d / name).write_bytes(b"x")
    new_log(tmp_path, CFG).close()
    assert (
        not list(d.glob("*.deleted"))
        and not list(d.glob("*.cleaned"))
        and not list(d.glob("*.swap"))
    )


def test_swap_file_replaces_segments(tmp_path: Path) -> None:
    lg = new_log(tmp_path, LogConfig(segment_bytes=300))
    fill(lg, 12)
    lg.update_high_watermark(12)
    bases = [s.base_offset for s in lg.segments]
    assert len(bases) >= 3
    # a "cleaned" copy of the first segment's batches, covering the first two segments
    keep = lg.read(0, 1 << 20).read_bytes()
    lg.close()
    d = tmp_path / "t-0"
    (d / "00000000000000000000.log.swap").write_bytes(keep)
    lg = new_log(tmp_path, LogConfig(segment_bytes=300))
    assert [s.base_offset for s in lg.segments] == bases
    assert not list(d.glob("*.swap"))


@pytest.mark.parametrize("cut", [1, 11, 12, 60, 61])
def test_any_cut_point_in_last_batch(tmp_path: Path, cut: int) -> None:
    d, _ = _crashed_log(tmp_path)
    seg = _last_segment(d)
    data = seg.read_bytes()
    last = struct.unpack_from(">i", data, 8)[0] + 12  # all batches are the same size
    seg.write_bytes(data[: len(data) - last + cut])
    lg = _reopen(tmp_path)
    assert lg.log_end_offset == 22


def test_random_cut_points_keep_every_complete_batch(tmp_path: Path) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    ends: list[tuple[int, int]] = []  # (end position in the single segment file, next offset)
    big = LogConfig(segment_bytes=1 << 20, index_interval_bytes=100)
    lg = new_log(tmp_path / "src", big)
    for i in range(15):
        lg.append_as_leader(make_batch(1 + i % 4, value_size=7 * i), 0)
        ends.append((lg.active_segment.size, lg.log_end_offset))
    lg.close_handlers()
    original = (tmp_path / "src" / "t-0" / "00000000000000000000.log").read_bytes()

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cut=st.integers(0, len(original)), flip=st.booleans())
    def check(cut: int, flip: bool) -> None:
        import shutil

        d = tmp_path / "work" / "t-0"
        shutil.rmtree(d.parent, ignore_errors=True)
        d.mkdir(parents=True)
        data = bytearray(original[:cut])
        if flip and cut > 0:
            data[cut - 1] ^= 0xFF  # corrupt the byte just before the cut too
        (d / "00000000000000000000.log").write_bytes(data)
        rec = Log(d, big, topic="t", partition=0, needs_recovery=True)
        intact = [e for e in ends if e[0] <= cut and not (flip and e[0] == cut)]
        want_size, want_leo = intact[-1] if intact else (0, 0)
        assert rec.log_end_offset == want_leo
        assert rec.active_segment.size == want_size
        assert bytes(original[:want_size]) == (d / "00000000000000000000.log").read_bytes()
        rec.close()

    check()


def test_recovery_point_stays_at_the_checkpoint_after_a_crash(tmp_path: Path) -> None:
    """Recovered data was re-validated, not made durable: as Kafka's LogLoader, the
    recovery point stays at min(checkpoint, log end) until the next flush, so a second
    crash re-validates it (and re-learns its epochs) again."""
    d, _ = _crashed_log(tmp_path)
    second_base = int(sorted(d.glob("*.log"))[1].name.split(".")[0])
    lg = _reopen(tmp_path, recovery_point=second_base)
    assert lg.log_end_offset == 24 and lg.recovery_point == second_base
    lg.flush()
    assert lg.recovery_point == 24
    lg.close()
    clean = new_log(tmp_path, CFG, recovery_point=0)  # a clean load: flushed to the end
    assert clean.recovery_point == 24


def _epoch_entries(lg: Log) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in lg.leader_epoch_cache.entries()]


@pytest.mark.parametrize("path", ["leader", "follower"])
def test_recovery_corrects_an_epoch_file_that_credits_data_to_a_later_epoch(
    tmp_path: Path, path: str
) -> None:
    """A power loss can keep the data appended after a restart but lose the (unsynced)
    epoch-file rewrite before it, leaving an entry for an epoch that never got data
    (epoch 5 from offset 2) in front of data of an older epoch. Recovery trusts the
    batches: it drops the stale entry and learns the data's own epoch."""
    src = new_log(tmp_path / "src", CFG)
    fill(src, 2, epoch=1)
    fill(src, 2, epoch=3 if path == "follower" else 1)
    src.update_high_watermark(src.log_end_offset)
    lg = new_log(tmp_path / "n", CFG)
    lg.append_as_follower(src.read(0, 1 << 20).read_bytes())
    lg.close_handlers()  # a crash: no clean close
    f = tmp_path / "n" / "t-0" / "leader-epoch-checkpoint"
    f.write_text("0\n2\n1 0\n5 2\n")  # the durable file the power loss left
    lg = new_log(tmp_path / "n", CFG, needs_recovery=True)
    assert lg.log_end_offset == 4
    if path == "follower":
        assert _epoch_entries(lg) == [(1, 0), (3, 2)]
        assert lg.end_offset_for_epoch(1) == (1, 2)
        assert lg.end_offset_for_epoch(3) == (3, 4)
    else:
        assert _epoch_entries(lg) == [(1, 0)]
        assert lg.end_offset_for_epoch(1) == (1, 4)
    lg.close()


def test_corrupt_leader_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    """An unreadable leader-epoch-checkpoint is deleted and the whole log recovered,
    even after a clean shutdown: the batches' epochs are the only other record."""
    lg = new_log(tmp_path, CFG)
    fill(lg, 2, epoch=1)
    fill(lg, 2, epoch=3)
    lg.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_text("zz")
    lg = new_log(tmp_path, CFG, recovery_point=4)
    assert _epoch_entries(lg) == [(1, 0), (3, 2)]
    assert (lg.log_end_offset, lg.recovery_point) == (4, 0)
    assert lg.end_offset_for_epoch(1) == (1, 2)
    lg.close()
