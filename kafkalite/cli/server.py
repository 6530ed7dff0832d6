"""``kafkalite-server CONFIG [--override key=value ...]``: run one broker until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from kafkalite.log.errors import ConfigError as LogConfigError
from kafkalite.server import gc_tuning
from kafkalite.server.broker import KafkaBroker
from kafkalite.server.config import BrokerConfig, ConfigError


def install_event_loop_policy() -> str:
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


async def serve(config: BrokerConfig) -> int:
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
    # the process is ours: keep full GC passes off the long-lived start-up state
    gc_tuning.install()
    print(
        f"kafkalite broker {broker.broker_id} ready on "
        + ", ".join(str(e) for e in broker.advertised),
        flush=True,
    )
    await stop.wait()
    logging.getLogger("kafkalite").info("shutting down")
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
        print(f"kafkalite-server: config file not found: {args.config}", file=sys.stderr)
        return 2
    except (ConfigError, LogConfigError) as e:
        print(f"kafkalite-server: {e}", file=sys.stderr)
        return 2
    loop_name = install_event_loop_policy()
    logging.getLogger("kafkalite").info("event loop: %s", loop_name)
    try:
        return asyncio.run(serve(config))
    except (ConfigError, LogConfigError) as e:
        print(f"kafkalite-server: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"kafkalite-server: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
