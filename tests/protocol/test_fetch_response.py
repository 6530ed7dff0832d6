"""The zero-copy Fetch response writer must be byte-identical to kio's encoding."""

import uuid

import pytest

from kafkalite.protocol import messages
from kafkalite.protocol.fetch_response import (
    MAX_VERSION,
    MIN_VERSION,
    FetchPartitionData,
    FetchTopicData,
    encode_fetch_response,
    flatten,
)

TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def _kio_dict(topics, **top):
    return {
        "throttle_time": top.get("throttle_time_ms", 0),
        "error_code": top.get("error_code", 0),
        "session_id": top.get("session_id", 0),
        "responses": [
            {
                "topic": t.topic,
                "topic_id": t.topic_id,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": p.error_code,
                        "high_watermark": p.high_watermark,
                        "last_stable_offset": p.last_stable_offset,
                        "log_start_offset": p.log_start_offset,
                        "aborted_transactions": None
                        if p.aborted_transactions is None
                        else [
                            {"producer_id": a, "first_offset": b} for a, b in p.aborted_transactions
                        ],
                        "preferred_read_replica": p.preferred_read_replica,
                        "records": p.records,
                    }
                    for p in t.partitions
                ],
            }
            for t in topics
        ],
    }


@pytest.mark.parametrize("version", range(MIN_VERSION, MAX_VERSION + 1))
def test_fetch_writer_matches_kio_bytes_for_every_version(version):
    topics = [
        FetchTopicData(
            "orders",
            TOPIC_ID,
            [
                FetchPartitionData(0, 0, 10, 10, 0, None, -1, b"\x00" * 70),
                FetchPartitionData(1, 1, 5, 5, 2, [(7, 3), (8, 4)], -1, None),
                FetchPartitionData(2, 0, 0, 0, 0, [], -1, b""),
            ],
        ),
        FetchTopicData("t2", uuid.UUID(int=5), []),
    ]
    ours = flatten(encode_fetch_response(version, topics, throttle_time_ms=3, session_id=9))
    kio_bytes = messages.encode_response(
        1, version, _kio_dict(topics, throttle_time_ms=3, session_id=9)
    )
    assert ours == kio_bytes


def test_fetch_writer_keeps_record_objects_out_of_the_byte_chunks():
    class Rng:
        size = 1000

        def read_bytes(self):
            return b"r" * 1000

    rng = Rng()
    parts = encode_fetch_response(
        12, [FetchTopicData("t", TOPIC_ID, [FetchPartitionData(0, records=rng)])]
    )
    assert rng in parts
    assert sum(len(p) for p in parts if isinstance(p, bytes)) < 100
