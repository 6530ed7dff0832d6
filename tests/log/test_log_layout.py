"""Byte-for-byte on-disk layout: what Kafka's own tools would read (behaviour 54, §10)."""

from __future__ import annotations

import struct
from pathlib import Path

from logtest_helpers import hand_batch

from kafkalite.log.checkpoint import OffsetCheckpointFile
from kafkalite.log.leader_epoch_cache import LeaderEpochFileCache
from kafkalite.log.log import Log
from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_manager import LogManager
from kafkalite.log.log_segment import file_name
from kafkalite.log.meta_properties import MetaProperties, write_meta_properties

VALUES = [b"0123456789", b"abcdefghij", b"ABCDEFGHIJ"]  # 3 records -> 112-byte batches


def _cfg() -> LogConfig:
    return LogConfig(index_interval_bytes=200, segment_index_bytes=1200)


def _append(lg: Log, i: int, epoch: int) -> bytes:
    """Append producer batch i; return the bytes the log must hold for it."""
    ts = 1000 + 10 * i
    produced = bytearray(hand_batch(0, VALUES, base_timestamp=ts))
    info = lg.append_as_leader(produced, epoch)
    assert info.first_offset == 3 * i and info.last_offset == 3 * i + 2
    return hand_batch(3 * i, VALUES, base_timestamp=ts, epoch=epoch)


def test_batch_size_is_112() -> None:
    assert len(hand_batch(0, VALUES, base_timestamp=0)) == 112


def test_segment_files_byte_for_byte(tmp_path: Path) -> None:
    lg = Log(tmp_path / "my-topic-3", _cfg(), topic="my-topic", partition=3, clock_ms=lambda: 5000)
    expected0 = b"".join(_append(lg, i, 0 if i < 3 else 2) for i in range(6))
    lg.roll()
    expected1 = b"".join(_append(lg, i, 2) for i in range(6, 9))
    lg.close()

    d = tmp_path / "my-topic-3"
    assert file_name(18) == "00000000000000000018"
    assert sorted(p.name for p in d.iterdir()) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "00000000000000000018.index",
        "00000000000000000018.log",
        "00000000000000000018.timeindex",
        "leader-epoch-checkpoint",
    ]
    assert (d / "00000000000000000000.log").read_bytes() == expected0
    assert (d / "00000000000000000018.log").read_bytes() == expected1
    # Batches at 0,112,224,336,448,560. An entry when >200 bytes were written
    # since the last one, keyed by the batch's last offset at its start position.
    assert (d / "00000000000000000000.index").read_bytes() == struct.pack(">iiii", 8, 224, 14, 448)
    # Max timestamp so far at those entries, then the final max on roll.
    assert (d / "00000000000000000000.timeindex").read_bytes() == struct.pack(
        ">qiqiqi", 1022, 8, 1042, 14, 1052, 17
    )
    # Second segment: offsets relative to base 18.
    assert (d / "00000000000000000018.index").read_bytes() == struct.pack(">ii", 26 - 18, 224)
    # Its max timestamp (1082) is already the last entry: no extra entry on close.
    assert (d / "00000000000000000018.timeindex").read_bytes() == struct.pack(">qi", 1082, 26 - 18)
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n2 9\n"


def test_active_index_is_preallocated_then_trimmed(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t-0", _cfg(), topic="t", partition=0)
    d = tmp_path / "t-0"
    assert (d / "00000000000000000000.index").stat().st_size == 1200
    assert (d / "00000000000000000000.timeindex").stat().st_size == 1200
    for i in range(3):
        _append(lg, i, 0)
    lg.close()
    assert (d / "00000000000000000000.index").stat().st_size == 8
    assert (d / "00000000000000000000.timeindex").stat().st_size == 12
    # Reopened, the active segment is preallocated again for appends.
    lg = Log(d, _cfg(), topic="t", partition=0)
    assert (d / "00000000000000000000.index").stat().st_size == 1200
    lg.close()


def test_layout_survives_reload_unchanged(tmp_path: Path) -> None:
    lg = Log(tmp_path / "t-0", _cfg(), topic="t", partition=0)
    expected = b"".join(_append(lg, i, 1) for i in range(6))
    lg.close()
    before = {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()}
    lg = Log(tmp_path / "t-0", _cfg(), topic="t", partition=0, needs_recovery=True)
    assert lg.log_end_offset == 18
    lg.close()
    after = {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()}
    assert after == before
    assert after["00000000000000000000.log"] == expected


def test_offset_checkpoint_text(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    f.write({("b-topic", 1): 7, ("a", 0): 123, ("b-topic", 0): 0})
    assert (
        tmp_path / "recovery-point-offset-checkpoint"
    ).read_bytes() == b"0\n3\na 0 123\nb-topic 0 0\nb-topic 1 7\n"
    assert f.read() == {("a", 0): 123, ("b-topic", 0): 0, ("b-topic", 1): 7}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_leader_epoch_checkpoint_text(tmp_path: Path) -> None:
    c = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    assert not (tmp_path / "leader-epoch-checkpoint").exists()
    c.assign(0, 0)
    c.assign(4, 100)
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n2\n0 0\n4 100\n"
    c.clear_and_flush()
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n0\n"


def test_meta_properties_text(tmp_path: Path) -> None:
    write_meta_properties(
        tmp_path, MetaProperties(3, "q1Sh-9_rTjunx2NwGaxUAQ"), now_s=1_763_796_780
    )
    assert (tmp_path / "meta.properties").read_text() == (
        "#\n#Sat Nov 22 07:33:00 UTC 2025\nbroker.id=3\ncluster.id=q1Sh-9_rTjunx2NwGaxUAQ\nversion=0\n"
    )


def test_manager_dir_layout(tmp_path: Path) -> None:
    lm = LogManager([tmp_path / "d1"], LogConfig(index_interval_bytes=200))
    lm.startup()
    for topic, p in (("orders-eu", 0), ("orders-eu", 1), ("__consumer_offsets", 12)):
        lg = lm.get_or_create_log(topic, p)
        for i in range(2):
            _append(lg, i, 0)
        if p == 1:
            lg.update_high_watermark(4)
    lm.shutdown()
    d = tmp_path / "d1"
    names = sorted(p.name for p in d.iterdir())
    assert names == [
        ".kafka_cleanshutdown",
        ".lock",
        "__consumer_offsets-12",
        "log-start-offset-checkpoint",
        "orders-eu-0",
        "orders-eu-1",
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
    ]
    assert (d / "replication-offset-checkpoint").read_text() == (
        "0\n3\n__consumer_offsets 12 0\norders-eu 0 0\norders-eu 1 4\n"
    )
    assert (d / "recovery-point-offset-checkpoint").read_text() == (
        "0\n3\n__consumer_offsets 12 6\norders-eu 0 6\norders-eu 1 6\n"
    )
    assert (d / "log-start-offset-checkpoint").read_text() == "0\n0\n"
