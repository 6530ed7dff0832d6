"""The server process's GC tuner: start-up state frozen, survivors of full passes frozen,
deleted topics handed back to the collector. Runs in a child process, since freezing is
process-wide."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import asyncio, gc
    from kafkalite.server import gc_tuning

    class Node:
        def __init__(self):
            self.me = self  # a cycle: only the cyclic collector can free it

    async def main():
        keep = [Node() for _ in range(1000)]
        tuner = gc_tuning.install()
        frozen = gc.get_freeze_count()
        assert frozen >= 1000, frozen
        assert not tuner.check()  # no full collection since start-up
        later = [Node() for _ in range(5000)]
        gc.collect()
        assert tuner.check()
        assert gc.get_freeze_count() >= frozen + 5000, (gc.get_freeze_count(), frozen)
        # a topic deletion drops frozen cyclic state: the collector must see it again
        del later
        gc_tuning.unfreeze_after_release()
        assert gc.get_freeze_count() == 0
        assert gc.collect() >= 5000
        gc_tuning.uninstall()
        print("ok", len(keep))

    asyncio.run(main())
    """
)


def test_gc_tuner_freezes_and_releases():
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok 1000"
