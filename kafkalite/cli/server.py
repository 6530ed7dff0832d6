"""``kafkalite-server CONFIG [--override key=value ...]``: run one broker until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from kafkalite.log.errors import ConfigError as LogConfigError
from kafkalite.log.errors import KafkaStorageError
from kafkalite.server import gc_tuning
from kafkalite.server.broker import KafkaBroker
from kafkalite.server.broker_identity import LogDirsUnusable
from kafkalite.server.config import BrokerConfig, ConfigError
from kafkalite.server.startup_checks import StartupError

log = logging.getLogger("kafkalite")


def install_event_loop_policy() -> str:
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


async def serve(config: BrokerConfig, loop_name: str = "asyncio") -> int:
    broker = KafkaBroker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except Exception:
        await broker.stop()
        raise
    # logged once started, so a failed start-up prints its one line and nothing else
    log.info("event loop: %s", loop_name)
    # the process is ours: keep full GC passes off the long-lived start-up state
    gc_tuning.install()
    print(
        f"kafkalite broker {broker.broker_id} ready on "
        + ", ".join(str(e) for e in broker.advertised),
        flush=True,
    )
    await stop.wait()
    log.info("shutting down")
    gc_tuning.uninstall()
    await broker.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafkalite-server", description="Run a kafkalite broker.")
    ap.add_argument("config", help="YAML config or Kafka server.properties")
    ap.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config property (repeatable)",
    )
    ap.add_argument("--log-level", default="INFO")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    overrides = {}
    for o in args.override:
        if "=" not in o:
            ap.error(f"--override needs KEY=VALUE, got {o!r}")
        k, v = o.split("=", 1)
        overrides[k.strip()] = v
    try:
        config = BrokerConfig.load(args.config, overrides)
    except FileNotFoundError:
        return _fail(f"config file not found: {args.config}", 2)
    except (ConfigError, LogConfigError) as e:
        return _fail(str(e), 2)
    loop_name = install_event_loop_policy()
    try:
        return asyncio.run(serve(config, loop_name))
    except (ConfigError, LogConfigError, StartupError) as e:
        return _fail(str(e), 2)
    except LogDirsUnusable as e:
        return _fail("log.dirs: " + "; ".join(e.reasons.values()), 1)
    except KafkaStorageError as e:
        return _fail(f"log.dirs: {e}", 1)
    except OSError as e:
        return _fail(str(e), 1)
    except Exception as e:  # never a traceback for a start-up failure: one line, details at DEBUG
        log.debug("start-up failed", exc_info=True)
        return _fail(f"start-up failed: {type(e).__name__}: {e} (--log-level DEBUG for details)", 1)


def _fail(message: str, code: int) -> int:
    """A start-up failure: one line on stderr, no traceback."""
    print(f"kafkalite-server: {message}", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
