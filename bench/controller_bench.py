"""Controller throughput: topic creation on one broker, leader election after a failure.

    python bench/controller_bench.py [--quick] [--only create|failover|stall]

(a) ``create``: one embedded broker (its metadata store persisted and fsynced, as a
    real single broker runs) creates 1,000 topics x 10 partitions through CreateTopics
    (confluent-kafka AdminClient, 100 topics per request). Timed until a stock
    client's Metadata shows every partition with a leader.
(b) ``failover``: an in-process 3-broker cluster with 10,000 partitions, RF 2, all
    led by broker 2 (followers alternate between brokers 0 and 1; broker 0 is the
    controller). Broker 2 is killed; timed until every partition has a new leader in
    every live broker's metadata (what clients are served), and checked with a
    stock client's Metadata afterwards.

For each, "controller" is the time the controller's event queue spent on the
events that did the work (TopicChange / BrokerChange, including the metadata
store writes and queuing the broker requests); the rest of the wall time is the
brokers applying LeaderAndIsr (creating logs) and UpdateMetadata, and the
request plumbing. ``--quick``: 100 topics x 10 partitions and 1,000 partitions.

(c) ``stall``: one embedded broker (real defaults: checkpoints and the metadata
    store fsynced) creates one topic of 4,000 partitions through CreateTopics,
    deletes it through DeleteTopics, then the same with 10,000 partitions. A
    client thread meanwhile sends ApiVersions requests one after another on its
    own connection, and a task on the broker's loop measures how late its timer
    fires: printed are the longest round trip the client saw and the longest the
    loop was held, per phase. Nothing else runs, so a long round trip is the
    broker's loop doing one big piece of work. ``--quick``: 1,000 and 4,000.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkalite.testing.embedded_broker import AsyncBroker  # noqa: E402
from kafkalite.testing.in_process_cluster import AsyncCluster  # noqa: E402


def _busy(controller: object, *names: str) -> float:
    busy = controller.event_manager.busy_s  # type: ignore[attr-defined]
    return sum(busy.get(n, 0.0) for n in names)


def _create_topics(bootstrap: str, names: list[str], partitions: int, per_request: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(0, len(names), per_request):
        batch = [NewTopic(n, partitions, 1) for n in names[i : i + per_request]]
        for name, f in admin.create_topics(
            batch, operation_timeout=300, request_timeout=300
        ).items():
            f.result(600)
            del name


def _all_online(bootstrap: str, names: list[str], partitions: int) -> bool:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=60)
    for n in names:
        t = md.topics.get(n)
        if t is None or len(t.partitions) != partitions:
            return False
        if any(p.leader < 0 for p in t.partitions.values()):
            return False
    return True


async def bench_create(topics: int, partitions: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="controller-bench-"))
    try:
        # no test defaults that a real broker would not have: the store fsyncs
        async with AsyncBroker(root, **{"auto.leader.rebalance.enable": False}) as b:
            k = b.broker
            names = [f"topic-{i:04d}" for i in range(topics)]
            t0 = time.monotonic()
            await asyncio.to_thread(_create_topics, b.bootstrap_servers, names, partitions, 100)
            while not await asyncio.to_thread(_all_online, b.bootstrap_servers, names, partitions):
                await asyncio.sleep(0.05)
            wall = time.monotonic() - t0
            ctrl = _busy(k.controller, "TopicChange")
            n = topics * partitions
            print(
                f"(a) create {topics} topics x {partitions} partitions on one broker: "
                f"{wall:.2f} s until all online in Metadata ({n / wall:,.0f} partitions/s); "
                f"controller events {ctrl:.2f} s "
                f"({k.controller.event_manager.processed.get('TopicChange', 0)} TopicChange events)"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _open_fds() -> int:
    """Descriptors this process holds (the three brokers, their logs, sockets)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


async def bench_failover(partitions: int) -> None:
    per_topic = 100
    topics = max(1, partitions // per_topic)
    async with AsyncCluster(
        3,
        **{
            "auto.leader.rebalance.enable": False,
            "zookeeper.session.timeout.ms": 6000,
            "kafkalite.log.fsync": False,
        },
    ) as c:
        ctrl_id = c.controller_id
        victim = 2 if ctrl_id != 2 else 1
        others = [i for i in range(3) if i != victim]
        t0 = time.monotonic()
        for t in range(topics):
            assignment = {p: [victim, others[(t * per_topic + p) % 2]] for p in range(per_topic)}
            await c.create_topic(f"t{t:03d}", assignments=assignment, timeout_s=600)
        setup = time.monotonic() - t0
        fds = _open_fds()
        controller = c.kafka(ctrl_id).controller
        before = _busy(controller, "BrokerChange")
        names = [f"t{t:03d}" for t in range(topics)]

        def elected() -> bool:
            for i in others:
                cache = c.kafka(i).metadata_cache
                for n in names:
                    tm = cache.get_topic(n)
                    if tm is None or any(p.leader in (victim, -1) for p in tm.partitions.values()):
                        return False
            return True

        t0 = time.monotonic()
        await c.crash(victim)
        while not elected():
            await asyncio.sleep(0.01)
        wall = time.monotonic() - t0
        busy = _busy(controller, "BrokerChange") - before
        survivors = ",".join(c.bootstrap_of(i) for i in others)
        assert await asyncio.to_thread(_all_online, survivors, names, per_topic)
        print(
            f"(b) elect new leaders for {topics * per_topic} partitions after a broker failure "
            f"(3 in-process brokers, RF 2): {wall:.2f} s until every live broker's metadata "
            f"shows them; controller BrokerChange event {busy:.2f} s "
            f"(setup: creating them took {setup:.1f} s; {fds} open descriptors in the process, "
            f"RLIMIT_NOFILE {resource.getrlimit(resource.RLIMIT_NOFILE)[0]})"
        )


class _Canary(threading.Thread):
    """ApiVersions v0 round trips on one connection, back to back: the longest one
    since the last :meth:`take` is how long a client waited for the broker."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.longest = 0.0
        self.stop = False

    def _recv(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("broker closed the canary connection")
            out += chunk
        return out

    def run(self) -> None:
        corr = 0
        while not self.stop:
            corr += 1
            t0 = time.monotonic()
            self.sock.sendall(struct.pack(">ihhih", 10, 18, 0, corr, -1))
            (size,) = struct.unpack(">i", self._recv(4))
            self._recv(size)
            self.longest = max(self.longest, time.monotonic() - t0)
            time.sleep(0.002)

    def take(self) -> float:
        v, self.longest = self.longest, 0.0
        return v


async def _loop_lag(out: list[float]) -> None:
    """How late a 5 ms timer fires: out[0] is the longest hold of the loop so far."""
    while True:
        t0 = time.monotonic()
        await asyncio.sleep(0.005)
        out[0] = max(out[0], time.monotonic() - t0 - 0.005)


async def bench_stall(sizes: list[int]) -> None:
    root = Path(tempfile.mkdtemp(prefix="controller-stall-"))
    try:
        async with AsyncBroker(
            root, **{"auto.leader.rebalance.enable": False, "kafkalite.log.fsync": True}
        ) as b:
            k = b.broker
            canary = _Canary(b.port)
            canary.start()
            lag = [0.0]
            lag_task = asyncio.get_running_loop().create_task(_loop_lag(lag))
            admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})

            def create(name: str, n: int) -> None:
                fs = admin.create_topics([NewTopic(name, n, 1)], operation_timeout=600)
                fs[name].result(900)

            def delete(name: str) -> None:
                admin.delete_topics([name], operation_timeout=600)[name].result(900)

            async def phase(what: str, fn: object, *args: object) -> None:
                await asyncio.sleep(0.2)
                canary.take()
                lag[0] = 0.0
                t0 = time.monotonic()
                await asyncio.to_thread(fn, *args)  # type: ignore[arg-type]
                if what.startswith("delete"):
                    while k.log_manager.all_logs() or args[0] in k.metadata_cache.topics:
                        await asyncio.sleep(0.01)
                wall = time.monotonic() - t0
                await asyncio.sleep(0.1)
                print(
                    f"(c) {what}: {wall:.2f} s; longest client round trip "
                    f"{canary.take() * 1000:.0f} ms, longest loop hold {lag[0] * 1000:.0f} ms",
                    flush=True,
                )

            for n in sizes:
                name = f"big-{n}"
                await phase(f"create a topic of {n:,} partitions", create, name, n)
                await phase(f"delete the topic of {n:,} partitions", delete, name)
            canary.stop = True
            lag_task.cancel()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100 topics x 10 and 1,000 partitions")
    ap.add_argument("--only", choices=["create", "failover", "stall"])
    args = ap.parse_args()
    topics, failover_partitions = (100, 1000) if args.quick else (1000, 10000)
    if args.only in (None, "create"):
        asyncio.run(bench_create(topics, 10))
    if args.only in (None, "failover"):
        asyncio.run(bench_failover(failover_partitions))
    if args.only in (None, "stall"):
        asyncio.run(bench_stall([1000, 4000] if args.quick else [4000, 10000]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
