"""LeaderAndIsr- and StopReplica-shaped input naming topics ``../x``, ``a/b`` or ``x\\0y``,
even with the live controller's id and epoch, never touches the filesystem: the
partition gets INVALID_TOPIC_EXCEPTION and the broker keeps serving."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing import AsyncBroker
from tests.controller.cluster import call

HOSTILE = ["../x", "../../escape", "a/b", "x\x00y", "..", "/abs"]


def _tree(root: Path) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, n), root)
        for d, dirs, files in os.walk(root)
        for n in dirs + files
        if not n.startswith("kafkalite-metadata")
    }


def _leader_and_isr(topic: str, epoch: int) -> ib.LeaderAndIsrRequest:
    state = ib.LeaderAndIsrPartitionState(0, epoch, 0, 1, [0], 1, [0], is_new=True)
    return ib.LeaderAndIsrRequest(
        0, epoch, [ib.LeaderAndIsrTopicState(topic, [state], uuid.uuid4())], []
    )


@pytest.mark.parametrize("topic", HOSTILE)
async def test_leader_and_isr_with_a_path_like_topic_name_touches_nothing(tmp_path, topic):
    data = tmp_path / "data"
    async with AsyncBroker(data) as b:
        epoch = b.broker.metadata_cache.controller_epoch
        before = _tree(tmp_path)
        resp = await call(
            b.port, ib.LEADER_AND_ISR, 7, _leader_and_isr(topic, epoch), signed_for=b.broker
        )
        assert resp.error_code == 0
        assert [e.error_code for t in resp.topics for e in t.partition_errors] == [
            ErrorCode.invalid_topic_exception
        ]
        assert _tree(tmp_path) == before
        assert b.broker.replica_manager.get_partition((topic, 0)) is None
        await b.create_topic("still-served")


async def test_stop_replica_delete_with_a_path_like_topic_name_deletes_nothing(tmp_path):
    data = tmp_path / "data"
    async with AsyncBroker(data) as b:
        await b.create_topic("x")  # data/logs/x-0, what "../logs/x" would name
        outside = data / "x-0"
        outside.mkdir()
        (outside / "precious").write_text("keep me")
        epoch = b.broker.metadata_cache.controller_epoch
        before = _tree(tmp_path)
        names = ["../x", "../logs/x", "..", "a/b", "x\x00y"]
        req = ib.StopReplicaRequest(
            0,
            epoch,
            [
                ib.StopReplicaTopicState(
                    n, [ib.StopReplicaPartitionState(0, ib.EPOCH_DURING_DELETE, True)]
                )
                for n in names
            ],
        )
        resp = await call(b.port, ib.STOP_REPLICA, 4, req, signed_for=b.broker)
        assert [(e.topic_name, e.error_code) for e in resp.partition_errors] == [
            (n, ErrorCode.invalid_topic_exception) for n in names
        ]
        assert _tree(tmp_path) == before
        assert b.broker.replica_manager.get_partition(("x", 0)) is not None
