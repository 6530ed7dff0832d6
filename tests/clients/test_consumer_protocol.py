"""The consumer group protocol of KIP-848 with a stock client: confluent-kafka (librdkafka)
with ``group.protocol=consumer`` against a real broker."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kafkalite.testing.embedded_broker import ThreadedBroker

SESSION_TIMEOUT_MS = 3000
BROKER_CONFIG = {
    "group.consumer.session.timeout.ms": SESSION_TIMEOUT_MS,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.heartbeat.interval.ms": 250,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 1,
}


@pytest.fixture(scope="module")
def cg_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedBroker]:
    b = ThreadedBroker(tmp_path_factory.mktemp("kip848"), **BROKER_CONFIG)
    b.start()
    try:
        yield b
    finally:
        b.stop()


def new_consumer(bootstrap: str, group: str, **extra: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )


def produce(bootstrap: str, topic: str, values: range, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in values:
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert p.flush(15) == 0


def owned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


class Group:
    """Consumers polled round-robin; every record is committed right after it is processed."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.consumers: list[Consumer] = []
        self.seen: Counter[int] = Counter()

    def add(self, **extra: object) -> Consumer:
        c = new_consumer(self.bootstrap, self.group, **extra)
        c.subscribe([self.topic])
        self.consumers.append(c)
        return c

    def poll_once(self) -> None:
        for c in self.consumers:
            m = c.poll(0.02)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            self.seen[int(m.value())] += 1  # processed ...
            self._commit(c, m)  # ... then committed

    def _commit(self, c: Consumer, m: object) -> None:
        for _ in range(50):
            try:
                c.commit(message=m, asynchronous=False)
                return
            except KafkaException as e:
                # the member's epoch moved on meanwhile: librdkafka learns it on its next
                # heartbeat, and the commit goes through then
                if e.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                    raise
                c.poll(0.05)
        raise AssertionError("commit kept failing with STALE_MEMBER_EPOCH")

    def until(self, done: Callable[[], bool], timeout: float = 30) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            self.poll_once()
            if done():
                return time.monotonic() - start
        raise AssertionError("timed out")

    def each_partition_once(self, n: int, members: int | None = None) -> bool:
        sets = [owned(c) for c in self.consumers]
        members = len(self.consumers) if members is None else members
        return (
            sum(len(s) for s in sets) == n
            and set().union(*sets) == set(range(n))
            and sum(1 for s in sets if s) == min(members, n)
        )

    def close(self) -> None:
        for c in self.consumers:
            c.close()
        self.consumers.clear()


def test_three_members_share_six_partitions_and_take_over_at_committed_offsets(cg_broker):
    bs = cg_broker.bootstrap_servers
    topic, group = f"kip848-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    cg_broker.create_topic(topic, partitions=6)
    g = Group(bs, group, topic)
    try:
        for _ in range(3):
            g.add()
        g.until(lambda: g.each_partition_once(6))
        assert sorted(len(owned(c)) for c in g.consumers) == [2, 2, 2]

        produce(bs, topic, range(0, 300), 6)
        g.until(lambda: len(g.seen) == 300)

        # a clean leave: the others take its partitions, well within the session timeout
        leaving = g.consumers.pop()
        leaving.close()
        took = g.until(lambda: g.each_partition_once(6))
        assert took < SESSION_TIMEOUT_MS / 1000

        produce(bs, topic, range(300, 450), 6)
        g.until(lambda: len(g.seen) == 450)

        # a new member takes over at the committed offsets: nothing is read twice
        g.add()
        g.until(lambda: g.each_partition_once(6))
        produce(bs, topic, range(450, 600), 6)
        g.until(lambda: len(g.seen) == 600)
        g.close()
        assert set(g.seen) == set(range(600))
        assert max(g.seen.values()) == 1, "with commits after processing: exactly once"
    finally:
        g.close()


_CRASHING_MEMBER = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([sys.argv[3]])
    last = None
    while True:
        c.poll(0.1)
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            print(",".join(map(str, now)), flush=True)
            last = now
    """
)


def test_partitions_of_a_crashed_member_move_within_the_session_timeout(cg_broker):
    bs = cg_broker.bootstrap_servers
    topic, group = f"kip848-crash-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    cg_broker.create_topic(topic, partitions=6)
    produce(bs, topic, range(0, 120), 6)
    g = Group(bs, group, topic)
    proc = subprocess.Popen(
        [sys.executable, "-c", _CRASHING_MEMBER, bs, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        while not proc.stdout.readline().strip():  # the child alone: it owns all six
            pass
        g.add()
        g.add()
        # the child gives up four of them (it polls, so it reconciles)
        g.until(lambda: sum(len(owned(c)) for c in g.consumers) == 4)
        os.kill(proc.pid, signal.SIGKILL)  # no leave: only the session timeout notices
        proc.wait()
        took = g.until(lambda: g.each_partition_once(6), timeout=SESSION_TIMEOUT_MS / 1000 + 15)
        assert took < SESSION_TIMEOUT_MS / 1000 + 5
        # the crashed member committed nothing: its partitions are read from the start
        g.until(lambda: len(g.seen) == 120)
        assert set(g.seen) == set(range(120))  # at least once
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        g.close()


def test_static_member_restart_keeps_its_partitions(cg_broker):
    bs = cg_broker.bootstrap_servers
    topic, group = f"kip848-static-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    cg_broker.create_topic(topic, partitions=4)
    a = new_consumer(bs, group, **{"group.instance.id": "a"})
    b = new_consumer(bs, group, **{"group.instance.id": "b"})
    try:
        for c in (a, b):
            c.subscribe([topic])
        g = Group(bs, group, topic)
        g.consumers = [a, b]
        g.until(lambda: g.each_partition_once(4))
        before = owned(a)
        epoch = _group_epoch(cg_broker, group)
        a.close()  # a static member's close is a temporary leave (epoch -2)
        a = new_consumer(bs, group, **{"group.instance.id": "a"})
        a.subscribe([topic])
        g.consumers = [a, b]
        g.until(lambda: g.each_partition_once(4))
        assert owned(a) == before
        assert _group_epoch(cg_broker, group) == epoch, "a static rejoin is no rebalance"
    finally:
        a.close()
        b.close()


def _group_epoch(b: ThreadedBroker, group: str) -> int:
    d = b.call(b.kafka.group_coordinator.consumer.describe, group)
    assert d.error == 0, d
    return int(d.group_epoch)


def test_regex_subscription_picks_up_a_topic_created_later(cg_broker):
    bs = cg_broker.bootstrap_servers
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    cg_broker.create_topic(f"{prefix}-a", partitions=2)
    c = new_consumer(bs, f"g-{prefix}", **{"topic.metadata.refresh.interval.ms": 500})
    c.subscribe([f"^{prefix}-.*"])
    try:
        g = Group(bs, f"g-{prefix}", "")
        g.consumers = [c]
        g.until(lambda: len(owned(c)) == 2)
        cg_broker.create_topic(f"{prefix}-b", partitions=3)
        produce(bs, f"{prefix}-b", range(0, 30), 3)
        g.until(lambda: len(g.seen) == 30)
        assert {tp.topic for tp in c.assignment()} == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        c.close()


def test_member_commits_and_reads_back_its_offsets(cg_broker):
    """OffsetCommit v9+ with the member's epoch, OffsetFetch with it (KIP-848 checks)."""
    bs = cg_broker.bootstrap_servers
    topic, group = f"kip848-fence-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    cg_broker.create_topic(topic, partitions=1)
    c = new_consumer(bs, group)
    c.subscribe([topic])
    try:
        g = Group(bs, group, topic)
        g.consumers = [c]
        g.until(lambda: len(owned(c)) == 1)
        c.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
        [tp] = c.committed([TopicPartition(topic, 0)], timeout=10)
        assert tp.offset == 7
    finally:
        c.close()


def test_groups_cli_lists_describes_and_resets_both_group_types(cg_broker, capsys):
    from kafkalite.cli.admin import main

    bs = cg_broker.bootstrap_servers
    topic = f"kip848-cli-{uuid.uuid4().hex[:6]}"
    cg_broker.create_topic(topic, partitions=2)
    produce(bs, topic, range(0, 20), 2)
    new_group, old_group = f"g-new-{uuid.uuid4().hex[:6]}", f"g-old-{uuid.uuid4().hex[:6]}"
    modern = Group(bs, new_group, topic)
    modern.add()
    classic = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": old_group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    classic.subscribe([topic])
    try:
        modern.until(lambda: len(modern.seen) == 20)  # each record committed after processing
        both = Group(bs, old_group, topic)
        both.consumers = [classic]
        both.until(lambda: len(owned(classic)) == 2)

        def run(*argv: str) -> str:
            assert main(["groups", "--bootstrap-server", bs, *argv]) == 0
            return capsys.readouterr().out

        listed = {tuple(line.split()) for line in run("--list").splitlines()[1:]}
        assert (new_group, "consumer", "Stable") in listed
        assert (old_group, "classic", "Stable") in listed
        assert {
            r[0]
            for r in (
                tuple(x.split()) for x in run("--list", "--type", "consumer").splitlines()[1:]
            )
        } >= {new_group}
        out = run("--describe", "--group", new_group)
        assert "TYPE consumer" in out and "STATE Stable" in out
        rows = [line.split() for line in out.splitlines() if line.startswith(topic)]
        assert [(r[1], r[2], r[3], r[4]) for r in rows] == [
            ("0", "10", "10", "0"),
            ("1", "10", "10", "0"),
        ]
        out = run("--describe", "--group", old_group, "--members")
        assert "TYPE classic" in out and f"{topic}(0,1)" in out

        # offsets can only be reset while the group has no members
        assert (
            main(
                [
                    "groups",
                    "--bootstrap-server",
                    bs,
                    "--reset-offsets",
                    "--group",
                    new_group,
                    "--topic",
                    topic,
                    "--to-earliest",
                    "--execute",
                ]
            )
            == 1
        )
        modern.close()
        run(
            "--reset-offsets",
            "--group",
            new_group,
            "--topic",
            f"{topic}:1",
            "--to-offset",
            "4",
            "--execute",
        )
        out = run("--describe", "--group", new_group)
        rows = [line.split() for line in out.splitlines() if line.startswith(topic)]
        assert [(r[1], r[2], r[4]) for r in rows] == [("0", "10", "0"), ("1", "4", "6")]
        run("--reset-offsets", "--group", new_group, "--topic", topic, "--to-earliest", "--execute")
        out = run("--describe", "--group", new_group)
        assert [line.split()[2] for line in out.splitlines() if line.startswith(topic)] == [
            "0",
            "0",
        ]
        out = run(
            "--reset-offsets",
            "--group",
            new_group,
            "--topic",
            topic,
            "--to-datetime",
            "2000-01-01T00:00:00Z",
        )  # a dry run: nothing committed
        assert [line.split()[3] for line in out.splitlines() if line.startswith(new_group)] == [
            "0",
            "0",
        ]
    finally:
        modern.close()
        classic.close()


class Ownership:
    """Who holds which partition, from the clients' own rebalance callbacks (all clients
    are polled by this one thread, so the callbacks are serialized); every hand-over is
    logged, and taking a partition someone else still holds fails at once."""

    def __init__(self) -> None:
        self.held: dict[int, str] = {}
        self.log: list[tuple[float, str, str, list[int]]] = []
        self.t0 = time.monotonic()
        self.lock = threading.Lock()  # the aiokafka member calls back from its own thread
        self.errors: list[str] = []

    def assign(self, who: str, parts: list[int]) -> None:
        with self.lock:
            self.log.append((time.monotonic() - self.t0, who, "assign", sorted(parts)))
            for p in parts:
                other = self.held.get(p)
                if other not in (None, who):
                    self.errors.append(f"partition {p} owned by {other} and {who}: {self.log}")
                self.held[p] = who
        assert not self.errors, self.errors[0]

    def revoke(self, who: str, parts: list[int]) -> None:
        with self.lock:
            self.log.append((time.monotonic() - self.t0, who, "revoke", sorted(parts)))
            for p in parts:
                if self.held.get(p) == who:
                    del self.held[p]

    def of(self, who: str) -> set[int]:
        return {p for p, w in self.held.items() if w == who}


class _Member:
    """A confluent-kafka (classic or consumer protocol) or kafka-python member."""

    def __init__(self, kind: str, name: str, bs: str, group: str, topic: str, own: Ownership):
        self.kind, self.name, self.own = kind, name, own
        if kind == "aiokafka":
            self._start_aiokafka(bs, group, topic)
            return
        if kind == "kafka-python":
            from kafka import ConsumerRebalanceListener, KafkaConsumer

            member = self

            class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
                def on_partitions_revoked(self, revoked):  # type: ignore[no-untyped-def]
                    own.revoke(member.name, [tp.partition for tp in revoked])

                def on_partitions_assigned(self, assigned):  # type: ignore[no-untyped-def]
                    own.assign(member.name, [tp.partition for tp in assigned])

            self.kp = KafkaConsumer(
                bootstrap_servers=bs,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=6000,
                heartbeat_interval_ms=200,
            )
            self.kp.subscribe([topic], listener=Listener())
            # The leader's first assignment must already see every partition. Otherwise
            # (its first JoinGroup usually beats its first Metadata for the topic) it
            # assigns nothing, and the metadata update that follows makes it rejoin; in
            # kafka-python 3.0.12 that rejoin can strand: when poll(timeout_ms=50) gives up
            # while the JoinGroup is in flight, the assignment run inside that JoinGroup
            # makes need_rejoin() False, so no later poll() awaits the join again; the
            # SyncGroup's assignment is never applied, heartbeats stay off, and the broker
            # drops the member at its session timeout (CI: "group did not settle").
            # Fetching the topic's metadata after subscribe() and before the first poll()
            # rebuilds the coordinator's metadata snapshot (its listener runs on that
            # update), so the first assignment is the full one and nothing changes later.
            parts = self.kp.partitions_for_topic(topic)
            assert parts, f"kafka-python has no metadata for {topic}"
            return
        conf: dict[str, object] = {
            "bootstrap.servers": bs,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        if kind == "consumer":
            conf["group.protocol"] = "consumer"
        else:
            conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 200})
        self.ck = Consumer(conf)
        self.ck.subscribe(
            [topic],
            on_assign=lambda c, ps: own.assign(self.name, [tp.partition for tp in ps]),
            on_revoke=lambda c, ps: own.revoke(self.name, [tp.partition for tp in ps]),
            on_lost=lambda c, ps: own.revoke(self.name, [tp.partition for tp in ps]),
        )

    def _start_aiokafka(self, bs: str, group: str, topic: str) -> None:
        """aiokafka runs on its own event loop in a thread until close()."""
        from aiokafka import AIOKafkaConsumer
        from aiokafka.abc import ConsumerRebalanceListener as AioListener

        own, name = self.own, self.name
        self.stop = threading.Event()

        class Listener(AioListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked):  # type: ignore[no-untyped-def]
                own.revoke(name, [tp.partition for tp in revoked])

            def on_partitions_assigned(self, assigned):  # type: ignore[no-untyped-def]
                own.assign(name, [tp.partition for tp in assigned])

        async def run() -> None:
            c = AIOKafkaConsumer(
                bootstrap_servers=bs,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=6000,
                heartbeat_interval_ms=200,
                metadata_max_age_ms=500,
            )
            c.subscribe([topic], listener=Listener())
            await c.start()
            try:
                while not self.stop.is_set():
                    await c.getmany(timeout_ms=50)
            finally:
                await c.stop()  # LeaveGroup, after revoking through the listener

        self.thread = threading.Thread(target=lambda: asyncio.run(run()), daemon=True)
        self.thread.start()  # the others keep being polled while it starts and joins

    def poll(self) -> None:
        if self.kind == "aiokafka":
            return
        if self.kind == "kafka-python":
            self.kp.poll(timeout_ms=50)
        else:
            self.ck.poll(0.01)

    def close(self) -> None:
        if self.kind == "aiokafka":
            self.stop.set()
            self.thread.join(30)
        elif self.kind == "kafka-python":
            self.kp.close()  # LeaveGroup, after revoking through the listener
        else:
            self.ck.close()
        self.own.revoke(self.name, sorted(self.own.of(self.name)))


def _wait_for_metadata(bootstrap: str, topic: str, partitions: int, timeout: float = 30) -> None:
    """Until a Metadata response shows every partition of ``topic`` with a leader."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            if all(p.leader >= 0 for p in md.partitions.values()):
                return
        time.sleep(0.05)
    raise AssertionError(f"{topic} not in Metadata with {partitions} partitions")


def test_rolling_upgrade_from_classic_to_consumer_never_owns_a_partition_twice(cg_broker):
    """kafka-python, aiokafka and confluent-kafka classic members are replaced one by one by
    confluent-kafka consumer-protocol members: the group is upgraded online, and at no
    moment does a partition have two owners."""
    bs = cg_broker.bootstrap_servers
    topic, group = f"kip848-roll-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    cg_broker.create_topic(topic, partitions=6)
    # every partition has a leader before the kafka-python leader reads the topic's
    # metadata (see _Member): its first assignment then covers all six
    _wait_for_metadata(bs, topic, 6)
    own = Ownership()
    members = [_Member("kafka-python", "kp-classic", bs, group, topic, own)]

    def settle(timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in members:
                m.poll()
            assert not own.errors, own.errors[0]
            with own.lock:
                if set(own.held) == set(range(6)) and all(own.of(m.name) for m in members):
                    return
        raise AssertionError(f"group did not settle: {own.held} {own.log[-10:]}")

    def group_type() -> str:
        d = cg_broker.call(cg_broker.kafka.group_coordinator.handle_list_groups, set(), set())
        return next(g.group_type for g in d[1] if g.group_id == group)

    try:
        settle()  # kafka-python alone first: it leads the classic group with the topic known
        # the other classic members one at a time: one classic rebalance each
        for kind, name in (
            ("aiokafka", "aio-classic"),
            ("classic", "ck-classic-1"),
            ("classic", "ck-classic-2"),
        ):
            members.append(_Member(kind, name, bs, group, topic, own))
            settle()
        assert group_type() == "classic"
        for i, old in enumerate(list(members)):
            members.remove(old)
            old.close()
            members.append(_Member("consumer", f"ck-consumer-{i}", bs, group, topic, own))
            settle()
            assert group_type() == "consumer"
        assert sorted(len(own.of(m.name)) for m in members) == [1, 1, 2, 2]
        # and back: one consumer-protocol member replaced by a classic one keeps it mixed
        old = members.pop(0)
        old.close()
        members.append(_Member("classic", "ck-classic-3", bs, group, topic, own))
        settle()
        # the log of every hand-over, each checked when it happened
        hand_overs = [e for e in own.log if e[2] == "assign" and e[3]]
        assert {e[1] for e in hand_overs} >= {f"ck-consumer-{i}" for i in range(4)} | {
            "ck-classic-3"
        }
    finally:
        for m in members:
            m.close()


def test_admin_client_lists_and_describes_a_consumer_group(cg_broker):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    bs = cg_broker.bootstrap_servers
    topic, group = f"kip848-admin-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    cg_broker.create_topic(topic, partitions=2)
    g = Group(bs, group, topic)
    c = g.add(**{"group.instance.id": "static-admin"})
    try:
        g.until(lambda: len(owned(c)) == 2)
        admin = AdminClient({"bootstrap.servers": bs})
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result()
        assert (group, ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE) in {
            (x.group_id, x.type, x.state) for x in listed.valid
        }
        classic_only = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result()
        assert group not in {x.group_id for x in classic_only.valid}
        d = admin.describe_consumer_groups([group])[group].result()
        assert (d.type, d.state, d.partition_assignor) == (
            ConsumerGroupType.CONSUMER,
            ConsumerGroupState.STABLE,
            "uniform",
        )
        [m] = d.members
        assert m.group_instance_id == "static-admin"
        assert sorted(tp.partition for tp in m.assignment.topic_partitions) == [0, 1]
    finally:
        g.close()
