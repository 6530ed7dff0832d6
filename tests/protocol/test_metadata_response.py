"""The Metadata response writer must be byte-identical to kio's encoding, every version."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kafkalite.protocol import messages
from kafkalite.protocol.metadata_response import (
    MAX_VERSION,
    MIN_VERSION,
    encode_metadata_response,
    encode_topic,
)

ERROR_CODES = sorted(int(e) for e in ErrorCode)
i32 = st.integers(-(2**31), 2**31 - 1)
ids = st.lists(st.integers(-1, 2**31 - 1), max_size=5)

partitions = st.lists(
    st.tuples(st.sampled_from(ERROR_CODES), i32, i32, i32, ids, ids, ids), max_size=6
)
topics = st.lists(
    st.tuples(
        st.sampled_from(ERROR_CODES),
        st.text(max_size=20),
        st.none() | st.uuids(),
        st.booleans(),
        partitions,
        i32,
    ),
    max_size=5,
)
brokers = st.lists(
    st.tuples(i32, st.text(max_size=20), i32, st.none() | st.text(max_size=10)), max_size=4
)


@pytest.mark.parametrize("version", range(MIN_VERSION, MAX_VERSION + 1))
@settings(max_examples=120, deadline=None)
@given(
    topics=topics,
    brokers=brokers,
    cluster_id=st.none() | st.text(max_size=22),
    controller_id=i32,
    throttle=st.integers(0, 2**31 - 1),
    cluster_ops=i32,
    error_code=st.sampled_from(ERROR_CODES),
)
def test_writer_matches_kio(
    version, topics, brokers, cluster_id, controller_id, throttle, cluster_ops, error_code
):
    kio_body = {
        "throttle_time": throttle,
        "brokers": [{"node_id": n, "host": h, "port": p, "rack": r} for n, h, p, r in brokers],
        "cluster_id": cluster_id,
        "controller_id": controller_id,
        "topics": [
            {
                "error_code": err,
                "name": name,
                # kio writes a null topic id as zeros too
                "topic_id": tid or uuid.UUID(int=0),
                "is_internal": internal,
                "partitions": [
                    {
                        "error_code": e,
                        "partition_index": i,
                        "leader_id": leader,
                        "leader_epoch": epoch,
                        "replica_nodes": replicas,
                        "isr_nodes": isr,
                        "offline_replicas": offline,
                    }
                    for e, i, leader, epoch, replicas, isr, offline in parts
                ],
                "topic_authorized_operations": ops,
            }
            for err, name, tid, internal, parts, ops in topics
        ],
        "cluster_authorized_operations": cluster_ops,
        "error_code": error_code,
    }
    ours = b"".join(
        encode_metadata_response(
            version,
            brokers,
            cluster_id,
            controller_id,
            [encode_topic(version, *t) for t in topics],
            throttle_time_ms=throttle,
            cluster_authorized_operations=cluster_ops,
            error_code=error_code,
        )
    )
    assert ours == messages.encode_response(3, version, kio_body)


@pytest.mark.parametrize("version", range(12, MAX_VERSION + 1))
def test_null_topic_name_from_v12(version):
    kio_body = {
        "throttle_time": 0,
        "brokers": [],
        "topics": [
            {"error_code": 100, "name": None, "topic_id": uuid.UUID(int=5), "partitions": []}
        ],
    }
    ours = b"".join(
        encode_metadata_response(
            version, [], None, -1, [encode_topic(version, 100, None, uuid.UUID(int=5), False, [])]
        )
    )
    assert ours == messages.encode_response(3, version, kio_body)
