"""``kafkalite broker-api-versions``: Kafka's ``kafka-broker-api-versions.sh``: each
broker's ApiVersions as NodeApiVersions prints them (``Produce(0): 3 to 11
[usable: 11]``); "usable" is the newest version this tool's codecs (kio) also know."""

from __future__ import annotations

import argparse
from functools import cache

from kafkalite.cli.common import add_bootstrap
from kafkalite.cli.wire_client import WireClient

METADATA = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)


@cache
def _name(key: int) -> str:
    try:
        from kafka.protocol.api_key import ApiKey

        return ApiKey(key).name
    except (ImportError, ValueError):
        return "UNKNOWN"


def _usable(key: int, lo: int, hi: int) -> int | None:
    from kafkalite.protocol import messages

    for v in range(hi, lo - 1, -1):
        try:
            messages.request_type(key, v)
            return v
        except Exception:
            continue
    return None


def describe(versions: dict[int, tuple[int, int]]) -> str:
    lines = []
    for key in sorted(versions):
        lo, hi = versions[key]
        rng = str(lo) if lo == hi else f"{lo} to {hi}"
        use = _usable(key, lo, hi)
        tail = f" [usable: {use}]" if use is not None else " [unusable: node too new]"
        lines.append(f"{_name(key)}({key}): {rng}{tail}")
    return "(\n\t" + ",\n\t".join(lines) + "\n)"


def run(args: argparse.Namespace) -> int:
    boot = WireClient(args.bootstrap_server, timeout=15.0)
    try:
        md = boot.call(METADATA, boot.version_for(METADATA, 9), {"topics": []})
        brokers = sorted(md.brokers, key=lambda b: b.node_id)
    finally:
        boot.close()
    failed = False
    for b in brokers:
        node = f"{b.host}:{b.port} (id: {b.node_id} rack: {b.rack or 'null'})"
        try:
            c = WireClient(f"{b.host}:{b.port}", timeout=15.0)
        except OSError as e:
            print(f"{node} -> ERROR: {e}")
            failed = True
            continue
        try:
            print(f"{node} -> {describe(c.versions)}")
        finally:
            c.close()
    return 1 if failed else 0
