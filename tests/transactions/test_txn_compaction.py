"""Compaction of a transactional topic, through stock clients: the cleaner removes aborted
data, then (Kafka's rule, KIP-534) each marker once its transaction has no data left and
``delete.retention.ms`` has passed, and a read_committed reader sees the same committed
values before and after."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.protocol.records import iter_batches
from kafkalite.testing.embedded_broker import ThreadedBroker
from tests.transactions.eos import BROKER_CONFIG, unique

TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "2048",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
}


def _read(bs: str, topic: str, isolation: str) -> dict[bytes, bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": unique("g"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    c.subscribe([topic])
    out: dict[bytes, bytes] = {}
    try:
        while True:
            m = c.poll(10)
            assert m is not None, "no end of partition within 10 s"
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    return out
                raise AssertionError(m.error())
            out[m.key()] = m.value()
    finally:
        c.close()


def _markers(b: ThreadedBroker, topic: str) -> list[tuple[int, int]]:
    """(producer id, offset) of each control batch in the partition's segment files."""
    lg = b.kafka.replica_manager.get_partition((topic, 0)).log
    out = []
    for seg in lg.segments:
        data = seg.log_path.read_bytes()
        for h, _raw in iter_batches(data):
            if h.is_control:
                out.append((h.producer_id, h.base_offset))
    return out


def test_compaction_removes_aborted_data_then_the_markers_of_emptied_transactions(
    kafka_broker_factory: Callable[..., ThreadedBroker],
) -> None:
    b = kafka_broker_factory(**BROKER_CONFIG, **{"log.cleaner.enable": False})
    bs = b.bootstrap_servers
    topic = unique("txn-compacted")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1, config=TOPIC_CONFIG)])[topic].result(30)
    p = Producer({"bootstrap.servers": bs, "transactional.id": unique("tid"), "linger.ms": 5})
    p.init_transactions(10)
    pad = b"p" * 100

    def txn(value: bytes, keys: range, commit: bool) -> None:
        p.begin_transaction()
        for k in keys:
            p.produce(topic, key=b"k%d" % k, value=value + pad, partition=0)
        assert p.flush(10) == 0  # librdkafka drops unflushed records on abort
        if commit:
            p.commit_transaction(10)
        else:
            p.abort_transaction(10)

    txn(b"c1", range(10), commit=True)
    txn(b"ab", range(10), commit=False)
    txn(b"c2", range(5), commit=True)
    filler = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 1000})

    def fill() -> None:
        """Other keys, so segments roll and there is dirty data for a cleaning pass."""
        for i in range(60):
            filler.produce(topic, key=b"f%d" % (i % 3), value=pad, partition=0)
        assert filler.flush(10) == 0

    fill()

    expected = {b"k%d" % k: (b"c2" if k < 5 else b"c1") + pad for k in range(10)}
    expected.update({b"f%d" % i: pad for i in range(3)})
    assert _read(bs, topic, "read_committed") == expected
    before = _markers(b, topic)
    assert len(before) == 3

    cleaner = b.kafka.log_manager.cleaner
    far = 2**50  # every delete horizon has passed
    # pass 1 removes the aborted data (the marker stays: its transaction had data in that
    # pass); a later pass, when new data makes the log dirty again, finds the abort marker
    # alone and removes it (delete.retention.ms=0), as Kafka's cleaner does
    for _ in range(3):
        while b.call(cleaner.clean_once, far) is not None:
            pass
        fill()

    committed = _read(bs, topic, "read_committed")
    assert committed == expected
    # the aborted records are gone from the log, so even read_uncommitted sees none of them
    assert _read(bs, topic, "read_uncommitted") == expected
    after = _markers(b, topic)
    # the abort marker lost its data and went; the first commit marker keeps k5..k9, and the
    # last one is the producer's last batch (its state is rebuilt from it)
    assert after == [before[0], before[2]]
