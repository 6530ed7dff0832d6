"""Cost of the decoding boundary per request, next to kio's decode of the same body.

    python bench/prescan_bench.py

The boundary (``kafkalite.protocol.prescan``) walks every kio-decoded request
before kio's native reader sees it; this prints the best-of-5 time per call for
a few requests clients send often, as their stock clients build them.
"""

from __future__ import annotations

import datetime
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kio.schema.heartbeat.v4.request import HeartbeatRequest  # noqa: E402
from kio.schema.join_group.v6.request import JoinGroupRequest, JoinGroupRequestProtocol  # noqa: E402
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic  # noqa: E402
from kio.schema.offset_commit.v8.request import (  # noqa: E402
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)

from kafkalite.protocol import messages  # noqa: E402
from kafkalite.protocol.prescan import prescan  # noqa: E402

CASES = {
    "Metadata v12, 1 topic": MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name="orders"),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    ),
    "Metadata v12, 100 topics": MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=f"orders-{i}") for i in range(100)),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    ),
    "OffsetCommit v8, 1 topic x 3 partitions": OffsetCommitRequest(
        group_id="group-1",
        generation_id_or_member_epoch=3,
        member_id="rdkafka-3f1c9a52-3c1e-4a4b-9b1a-6f2b1e0c5d7e",
        group_instance_id=None,
        topics=(
            OffsetCommitRequestTopic(
                name="orders",
                partitions=tuple(
                    OffsetCommitRequestPartition(
                        partition_index=i,
                        committed_offset=1000 + i,
                        committed_leader_epoch=0,
                        committed_metadata="",
                    )
                    for i in range(3)
                ),
            ),
        ),
    ),
    "JoinGroup v6, 2 protocols": JoinGroupRequest(
        group_id="group-1",
        session_timeout=datetime.timedelta(seconds=45),
        rebalance_timeout=datetime.timedelta(seconds=300),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(
            JoinGroupRequestProtocol(name="range", metadata=b"\x00" * 40),
            JoinGroupRequestProtocol(name="roundrobin", metadata=b"\x00" * 40),
        ),
    ),
    "Heartbeat v4": HeartbeatRequest(
        group_id="group-1",
        generation_id=3,
        member_id="rdkafka-3f1c9a52-3c1e-4a4b-9b1a-6f2b1e0c5d7e",
        group_instance_id=None,
    ),
}


def best_us(fn: object, n: int) -> float:
    return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6  # type: ignore[arg-type]


def main() -> None:
    print(f"{'request':42} {'bytes':>6} {'prescan us':>11} {'kio decode us':>14}")
    for name, entity in CASES.items():
        cls = type(entity)
        frame = b"\x00" * 24 + messages.encode(entity)  # as if behind a request header
        reader = messages._reader(cls)
        n = 20_000
        pre = best_us(lambda: prescan(cls, frame, 24), n)  # noqa: B023
        kio = best_us(lambda: reader(frame, 24), n)  # noqa: B023
        print(f"{name:42} {len(frame) - 24:6} {pre:11.2f} {kio:14.2f}")


if __name__ == "__main__":
    main()
