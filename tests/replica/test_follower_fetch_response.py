"""The follower's zero-copy Fetch v12 reader agrees with kio's codec on every field it uses."""

from __future__ import annotations

from typing import Any

import pytest

from kafkalite.protocol import messages
from kafkalite.replica.fetch_response import parse_fetch_response_v12


def _partition(index: int, records: bytes | None, **extra: Any) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": extra.pop("error_code", 0),
        "high_watermark": 1000 + index,
        "last_stable_offset": 900 + index,
        "log_start_offset": 7 + index,
        "aborted_transactions": extra.pop("aborted", None),
        "preferred_read_replica": -1,
        "records": records,
        **extra,
    }


def test_parse_matches_kio_and_records_are_views_of_the_frame() -> None:
    big = bytes(range(256)) * 1200  # > 127 bytes: multi-byte varint lengths
    body = {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 123456,
        "responses": [
            {
                "topic": "t-é",
                "partitions": [
                    _partition(0, big, aborted=[{"producer_id": 5, "first_offset": 9}] * 3),
                    _partition(1, None, error_code=1),  # OFFSET_OUT_OF_RANGE, null records
                    _partition(2, b""),
                    # tagged fields set: skipped, not misread as records
                    _partition(
                        3,
                        b"abc",
                        diverging_epoch={"epoch": 4, "end_offset": 77},
                        current_leader={"leader_id": 2, "leader_epoch": 9},
                    ),
                ],
            },
            {"topic": "other", "partitions": [_partition(7, b"x" * 300)]},
        ],
    }
    encoded = messages.encode_response(1, 12, body)
    frame = bytearray(b"\x00\x00\x00\x01\x00" + encoded)  # correlation id + no header tags
    want = messages.decode_response(1, 12, bytes(frame), 5)
    got = parse_fetch_response_v12(frame, 5)
    assert got.error_code == int(want.error_code) and got.session_id == int(want.session_id)
    assert [t.topic for t in got.responses] == [str(t.topic) for t in want.responses]
    for gt, wt in zip(got.responses, want.responses, strict=True):
        for gp, wp in zip(gt.partitions, wt.partitions, strict=True):
            assert gp.partition_index == int(wp.partition_index)
            assert gp.error_code == int(wp.error_code)
            assert gp.high_watermark == int(wp.high_watermark)
            assert gp.log_start_offset == int(wp.log_start_offset)
            assert (None if gp.records is None else bytes(gp.records)) == wp.records
    # no copy: the records are the frame's own bytes
    view = got.responses[0].partitions[0].records
    assert view is not None and view.obj is frame


def test_a_truncated_response_is_an_error_not_short_records() -> None:
    body = {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 1,
        "responses": [{"topic": "t", "partitions": [_partition(0, b"y" * 1000)]}],
    }
    encoded = messages.encode_response(1, 12, body)
    for cut in (len(encoded) - 1, len(encoded) - 500, 20):
        with pytest.raises(ValueError):
            parse_fetch_response_v12(encoded[:cut], 0)
