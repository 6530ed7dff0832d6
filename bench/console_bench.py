"""What the web console costs the broker's event loop, on a broker with many partitions.

    python bench/console_bench.py [--topics 100] [--partitions 20] [--groups 50]

Starts an embedded broker with the console on, creates ``--topics`` topics of
``--partitions`` partitions (one record in each), ``--groups`` groups with committed
offsets on one topic each, then times, on the broker's loop, one sampler reading
(done once a second) and one render of each page (what a browser's request holds the
loop for; the HTTP exchange around it is asyncio streams). Prints the median and the
maximum of ``--rounds`` runs in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.coordinator.group.group_metadata import OffsetAndMetadata  # noqa: E402
from kafkalite.protocol.records import build_batch  # noqa: E402
from kafkalite.server.console.http import HttpRequest, parse_target  # noqa: E402
from kafkalite.testing import AsyncBroker  # noqa: E402


async def run(args: argparse.Namespace) -> None:
    async with AsyncBroker(**{"kafkalite.console.port": 0}) as b:
        kb = b.broker
        assert kb is not None and kb.console is not None and kb.console.app is not None
        for t in range(args.topics):
            await b.create_topic(f"topic-{t:04d}", partitions=args.partitions)
        rm = kb.replica_manager
        batch = build_batch([(b"key", b"x" * 200)])
        for (topic, _p), part in list(rm.partitions.items()):
            if not topic.startswith("__") and part.log is not None:
                part.log.append_as_leader(bytearray(batch), part.leader_epoch)
                part.log.update_high_watermark(part.log.log_end_offset)
        gc = kb.group_coordinator
        await gc.ensure_offsets_topic()
        for g in range(args.groups):
            topic = f"topic-{g % args.topics:04d}"
            offsets = {(topic, p): OffsetAndMetadata(0) for p in range(args.partitions)}
            await gc.handle_commit_offsets(f"group-{g:03d}", "", None, -1, offsets, 9)
        app = kb.console.app
        sampler = app.sampler

        async def atimed(path: str) -> tuple[float, float]:
            segments, query = parse_target(path)
            runs = []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                resp = await app.handle(
                    HttpRequest("GET", segments, query, headers={"host": "127.0.0.1"})
                )
                runs.append((time.perf_counter() - t0) * 1000)
                assert resp.status == 200, (path, resp.status)
            return statistics.median(runs), max(runs)

        n = sum(1 for tp in rm.partitions if not tp[0].startswith("__"))
        print(
            f"{args.topics} topics, {n} partitions (+ __consumer_offsets), "
            f"{args.groups} groups; ms on the event loop, median / max of {args.rounds}"
        )
        runs = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            await sampler.tick()
            runs.append((time.perf_counter() - t0) * 1000)
        rows = [
            ("sampler reading (once a second; all its steps)", (statistics.median(runs), max(runs)))
        ]
        for path in (
            "/",
            "/topics",
            "/topics/topic-0000",
            "/topics/topic-0000/messages?partition=0&limit=100",
            "/groups",
            "/groups/group-000",
            "/groups/group-000/lag.json",
            "/brokers",
            "/api/samples",
        ):
            rows.append((f"GET {path}", await atimed(path)))
        for name, (med, mx) in rows:
            print(f"  {name:<55} {med:8.2f} {mx:8.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=20)
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
