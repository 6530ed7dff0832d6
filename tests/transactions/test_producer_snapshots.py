"""Producer-state ``.snapshot`` files (Kafka's ProducerStateManager format) and
producer.id.expiration.ms."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from kafkalite.log.log import Log
from kafkalite.log.log_config import LogConfig
from kafkalite.log.producer_state import ProducerStateManager, list_snapshots
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.record_batch import iter_headers
from kafkalite.protocol.records import build_batch
from tests.transactions.test_txn_log_units import _append, _marker, _txn_batch


def _idem(pid: int, seq: int, n: int = 2, epoch: int = 0, ts: int = 1000) -> bytearray:
    return bytearray(
        build_batch(
            [(None, b"v")] * n,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            timestamp_ms=ts,
        )
    )


@pytest.fixture
def scans(monkeypatch):
    """The offsets producer-state loads started scanning from."""
    starts: list[int] = []
    real = ProducerStateManager._scan

    def spy(self, segments, start_offset, *, rebuild_indexes):
        starts.append(start_offset)
        return real(self, segments, start_offset, rebuild_indexes=rebuild_indexes)

    monkeypatch.setattr(ProducerStateManager, "_scan", spy)
    return starts


def _open(d: Path, **kw) -> Log:
    lg = Log(d, LogConfig(segment_bytes=400), topic="t", partition=0, **kw)
    lg.update_high_watermark(lg.log_end_offset)
    return lg


def test_snapshots_at_roll_and_close_in_kafkas_format(tmp_path: Path, scans):
    d = tmp_path / "t-0"
    lg = _open(d)
    seq = 0
    while lg.num_segments < 3:
        _append(lg, _idem(7, seq))
        seq += 2
    rolled = [o for o, _p in list_snapshots(d)]
    assert rolled and set(rolled) <= {s.base_offset for s in lg.segments}
    _append(lg, _txn_batch(9, [b"t"], seq=0))
    txn_first = lg.log_end_offset - 1
    end = lg.log_end_offset
    lg.close()
    snaps = list_snapshots(d)
    assert snaps[-1][0] == end  # one per roll, and the clean close's at the log end
    assert set(rolled) <= {o for o, _ in snaps[:-1]} <= {s.base_offset for s in lg.segments}

    raw = snaps[-1][1].read_bytes()
    version, crc = struct.unpack_from(">hI", raw, 0)
    assert version == 1 and crc == crc32c.crc32c(raw[6:])
    (count,) = struct.unpack_from(">i", raw, 6)
    entries = [struct.unpack_from(">qhiqiqiq", raw, 10 + i * 46) for i in range(count)]
    by_pid = {e[0]: e for e in entries}
    # producer 7: epoch 0, last sequence, its last offset, offsetDelta 1, no open transaction
    assert by_pid[7][1:5] == (0, seq - 1, txn_first - 1, 1) and by_pid[7][7] == -1
    assert by_pid[9][7] == txn_first  # currentTxnFirstOffset

    scans.clear()
    again = _open(d)
    assert again.last_stable_offset == txn_first
    assert scans == [end]  # loaded from the snapshot, nothing before it scanned
    # sequences carry on from the snapshot: a gap is refused, the next one accepted
    with pytest.raises(KafkaError) as e:
        again.producer_state.check([h for _, h in iter_headers(_idem(7, seq + 4))])
    assert e.value.code == ErrorCode.out_of_order_sequence_number
    assert again.producer_state.check([h for _, h in iter_headers(_idem(7, seq))]) is None
    again.close()


def test_unclean_start_ignores_snapshots_and_truncation_drops_later_ones(tmp_path: Path, scans):
    d = tmp_path / "t-0"
    lg = _open(d)
    _append(lg, _txn_batch(3, [b"a"]))
    _append(lg, _marker(3, commit=False))
    for i in range(20):
        _append(lg, _idem(4, 2 * i))
    lg.close()
    assert list_snapshots(d)
    scans.clear()
    crashed = _open(d, needs_recovery=True)
    assert list_snapshots(d) == []  # recovery may have reset .txnindex: scan everything
    assert [t.producer_id for t in crashed.collect_aborted_transactions(0, 100)] == [3]
    assert scans == [0]
    crashed.roll()
    mid = crashed.log_end_offset
    _append(crashed, _idem(4, 40))
    crashed.roll()
    assert [o for o, _ in list_snapshots(d)] == [mid, crashed.log_end_offset]
    crashed.truncate_to(mid)
    assert [o for o, _ in list_snapshots(d)] == [mid]
    crashed.close()


def test_producer_id_expiration():
    st = ProducerStateManager()
    st.update([h for _, h in iter_headers(_idem(1, 0, ts=1_000))])
    st.update([h for _, h in iter_headers(_txn_batch(2, [b"x"]))])  # open transaction
    st.update([h for _, h in iter_headers(_idem(3, 0, ts=90_000))])
    assert st.remove_expired(now_ms=100_000, expiration_ms=50_000) == 1
    assert set(st.producers) == {2, 3}


def test_crash_recovery_loads_from_a_snapshot_before_the_recovered_segments(tmp_path: Path, scans):
    d = tmp_path / "t-0"
    lg = _open(d)
    _append(lg, _txn_batch(1, [b"a"]))
    _append(lg, _marker(1, commit=False))  # aborted, in the first segment
    seq = 0
    while lg.num_segments < 4:
        _append(lg, _idem(4, seq))
        seq += 2
    _append(lg, _txn_batch(2, [b"b"]))
    _append(lg, _marker(2, commit=False))  # aborted, in the last segment
    bases = [s.base_offset for s in lg.segments]
    lg.close()
    scans.clear()
    # a crash with the recovery point in the third segment: it and the last are re-validated
    crashed = _open(d, needs_recovery=True, recovery_point=bases[2] + 1)
    assert all(o <= bases[2] for o, _ in list_snapshots(d))
    assert [t.producer_id for t in crashed.collect_aborted_transactions(0, 10_000)] == [1, 2]
    assert scans and 0 < scans[0] <= bases[2]  # from a snapshot, not from the log start
    crashed.close()
