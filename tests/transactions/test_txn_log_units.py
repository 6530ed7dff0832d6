"""Unit tests: ``__transaction_state`` record formats, the log's open transactions, LSO
and ``.txnindex`` (rebuilt by crash recovery), the partition's fencing of old markers."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkalite.coordinator.transaction.txn_log import (
    TxnMetadata,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from kafkalite.log.log import Log
from kafkalite.log.log_config import LogConfig
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.record_batch import iter_headers
from kafkalite.protocol.records import ControlRecordType, build_batch, build_control_batch
from kafkalite.replica.producer_state import ProducerStateManager


def test_transaction_log_key_is_kafkas_layout():
    assert encode_key("abc") == b"\x00\x00\x00\x03abc"
    assert decode_key(encode_key("tx-é")) == "tx-é"


def test_transaction_log_value_v0_layout_and_round_trip():
    m = TxnMetadata(
        "t", 7, -1, 3, 2, 60000, TxnState.ONGOING, {("b", 1), ("a", 0), ("a", 2)}, 111, 222
    )
    raw = encode_value(m)
    # version, pid, epoch, timeout, status, 2 topics: a[0,2] b[1], last update, start
    expected = (
        struct.pack(">hqhib", 0, 7, 3, 60000, 1)
        + struct.pack(">i", 2)
        + struct.pack(">h", 1)
        + b"a"
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">h", 1)
        + b"b"
        + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 222, 111)
    )
    assert raw == expected
    back = decode_value("t", raw)
    assert (back.producer_id, back.producer_epoch, back.state, back.partitions) == (
        7,
        3,
        TxnState.ONGOING,
        {("a", 0), ("a", 2), ("b", 1)},
    )
    assert (back.txn_timeout_ms, back.txn_start_ms, back.txn_last_update_ms) == (60000, 111, 222)


def test_transaction_log_value_v1_flexible_with_tagged_fields():
    # v1: compact arrays/strings (+1), per-element tags, then top-level tags
    raw = (
        struct.pack(">hqhib", 1, 9, 0, 1000, 4)
        + bytes([2])  # one topic
        + bytes([2])
        + b"x"
        + bytes([2])
        + struct.pack(">i", 5)
        + b"\x00"
        + struct.pack(">qq", 5, 4)
        + bytes([2])  # two tagged fields
        + bytes([0, 8])
        + struct.pack(">q", 8)  # PreviousProducerId
        + bytes([2, 2])
        + struct.pack(">h", 2)  # ClientTransactionVersion
    )
    m = decode_value("t", raw)
    assert (m.producer_id, m.last_producer_id, m.state, m.partitions) == (
        9,
        8,
        TxnState.COMPLETE_COMMIT,
        {("x", 5)},
    )


def test_partition_for_uses_javas_string_hash():
    # Utils.abs("txn".hashCode()) % 50; "txn".hashCode() == 115306
    assert partition_for("txn", 50) == 115306 % 50 == 6


def _txn_batch(pid: int, values: list[bytes], epoch: int = 0, seq: int = 0) -> bytearray:
    return bytearray(
        build_batch(
            [(None, v) for v in values],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=True,
        )
    )


def _marker(pid: int, commit: bool, epoch: int = 0) -> bytearray:
    t = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return bytearray(build_control_batch(t, 0, producer_id=pid, producer_epoch=epoch))


def _append(lg: Log, buf: bytearray) -> int:
    info = lg.append_as_leader(buf, 0)
    lg.update_high_watermark(lg.log_end_offset)
    return info.first_offset


def test_lso_follows_open_transactions_and_aborts_are_indexed(tmp_path: Path):
    lg = Log(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20), topic="t", partition=0)
    _append(lg, bytearray(build_batch([(None, b"plain")])))  # 0
    _append(lg, _txn_batch(1, [b"a", b"b"]))  # 1-2: producer 1 opens
    _append(lg, _txn_batch(2, [b"c"]))  # 3: producer 2 opens
    assert lg.last_stable_offset == 1
    _append(lg, _marker(1, commit=False))  # 4: producer 1 aborts
    assert lg.last_stable_offset == 3
    _append(lg, _marker(2, commit=True))  # 5
    assert lg.last_stable_offset == lg.high_watermark == 6
    [a] = lg.collect_aborted_transactions(0, 6)
    # the LSO stored with the abort is producer 2's first offset, still open then
    assert (a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset) == (1, 1, 4, 3)
    assert lg.collect_aborted_transactions(5, 6) == []
    lg.close()

    # crash recovery re-validates the segment and resets its indexes: the abort comes back
    (tmp_path / "t-0" / "00000000000000000000.txnindex").write_bytes(b"")
    again = Log(
        tmp_path / "t-0",
        LogConfig(segment_bytes=1 << 20),
        topic="t",
        partition=0,
        needs_recovery=True,
    )
    again.update_high_watermark(again.log_end_offset)
    assert [
        (t.producer_id, t.first_offset, t.last_offset)
        for t in again.collect_aborted_transactions(0, 6)
    ] == [(1, 1, 4)]
    assert again.last_stable_offset == 6
    again.close()


def test_open_transaction_survives_reopen_and_truncation(tmp_path: Path):
    lg = Log(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20), topic="t", partition=0)
    _append(lg, _txn_batch(5, [b"x"]))
    _append(lg, bytearray(build_batch([(None, b"y")])))
    lg.close()
    lg = Log(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20), topic="t", partition=0)
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.last_stable_offset == 0
    lg.truncate_to(0)
    assert lg.last_stable_offset == lg.high_watermark == 0
    lg.close()


def test_marker_of_an_older_epoch_is_fenced():
    state = ProducerStateManager()
    [h] = [h for _, h in iter_headers(_txn_batch(3, [b"v"], epoch=2))]
    state.update([h])
    [old] = [h for _, h in iter_headers(_marker(3, commit=True, epoch=1))]
    with pytest.raises(KafkaError) as e:
        state.check([old])
    assert e.value.code == ErrorCode.invalid_producer_epoch
    [ok] = [h for _, h in iter_headers(_marker(3, commit=True, epoch=2))]
    assert state.check([ok]) is None
