"""The zero-copy Fetch response writer must be byte-identical to kio's encoding."""

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

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


i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
partitions = st.builds(
    FetchPartitionData,
    partition_index=i32,
    error_code=st.sampled_from(sorted(int(e) for e in ErrorCode)),
    high_watermark=i64,
    last_stable_offset=i64,
    log_start_offset=i64,
    aborted_transactions=st.none() | st.lists(st.tuples(i64, i64), max_size=3),
    preferred_read_replica=i32,
    records=st.none() | st.binary(max_size=200),
)
topics = st.lists(
    st.builds(
        FetchTopicData,
        topic=st.text(max_size=20),
        topic_id=st.uuids(),
        partitions=st.lists(partitions, max_size=4),
    ),
    max_size=4,
)


@pytest.mark.parametrize("version", range(MIN_VERSION, MAX_VERSION + 1))
@settings(max_examples=100, deadline=None)
@given(topics=topics, throttle=i32, error=st.sampled_from([0, 70]), session=i32)
def test_fetch_writer_matches_kio_for_generated_responses(
    version, topics, throttle, error, session
):
    top = {"throttle_time_ms": max(throttle, 0), "error_code": error, "session_id": session}
    ours = flatten(encode_fetch_response(version, topics, **top))
    assert ours == messages.encode_response(1, version, _kio_dict(topics, **top))


@pytest.mark.parametrize("version", [11, 12, 13])
@pytest.mark.parametrize("n", [126, 127, 128, 16383, 16384])
def test_fetch_writer_lengths_around_varint_byte_boundaries(version, n):
    topics = [
        FetchTopicData(
            "t" * min(n, 249),
            TOPIC_ID,
            [
                FetchPartitionData(i, 0, 1, 1, 0, [(1, 2)] * (n if n < 200 else 1), -1, b"r" * n)
                for i in range(n if n < 200 else 2)
            ],
        )
    ]
    ours = flatten(encode_fetch_response(version, topics))
    assert ours == messages.encode_response(1, version, _kio_dict(topics))


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
