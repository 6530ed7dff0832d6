"""``kafkalite console-producer``: Kafka's ``kafka-console-producer.sh``: one record per
line of stdin, parsed as Kafka's LineMessageReader does (``--property parse.key=true
key.separator=: parse.headers=true headers.delimiter=<TAB> headers.separator=,
headers.key.separator=: null.marker=...``). ``--partition`` (a kafkalite extension:
Kafka's tool has none) sends every record to one partition.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kafkalite.cli.common import CliError, add_bootstrap, client_config, load_properties

#: LineMessageReader's defaults
READER_DEFAULTS = {
    "parse.key": "false",
    "key.separator": "\t",
    "parse.headers": "false",
    "headers.delimiter": "\t",
    "headers.separator": ",",
    "headers.key.separator": ":",
    "ignore.error": "false",
}
#: kafka-console-producer.sh's options that are producer settings
_ACKS = {"all": "all", "-1": "all", "1": "1", "0": "0"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--property", action="append", nargs="+", default=[], metavar="KEY=VALUE")
    p.add_argument("--reader-property", action="append", nargs="+", default=[])
    p.add_argument("--producer-property", action="append", nargs="+", default=[])
    p.add_argument("--producer.config", dest="producer_config")
    p.add_argument("--partition", type=int, help="kafkalite extension: one partition")
    p.add_argument("--compression-codec", nargs="?", const="gzip")
    p.add_argument("--request-required-acks", default="-1")
    p.add_argument("--sync", action="store_true")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--timeout", type=int, help="linger.ms")
    p.add_argument("--max-block-ms", type=int)


def kv_pairs(groups: list[list[str]], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (x for g in groups for x in g):
        k, sep, v = item.partition("=")
        if not sep:
            raise CliError(f"{flag} needs KEY=VALUE, not {item!r}", 2)
        out[k.strip()] = v
    return out


def unescape(s: str) -> str:
    """``\\t`` and friends as typed on a shell line."""
    return s.encode("utf-8").decode("unicode_escape") if "\\" in s else s


class LineReader:
    """Kafka's LineMessageReader: ``[headers<delim>][key<sep>]value``."""

    def __init__(self, props: dict[str, str]) -> None:
        p = {**READER_DEFAULTS, **props}
        self.parse_key = p["parse.key"].lower() == "true"
        self.parse_headers = p["parse.headers"].lower() == "true"
        self.key_sep = unescape(p["key.separator"])
        self.h_delim = unescape(p["headers.delimiter"])
        self.h_sep = unescape(p["headers.separator"])
        self.h_key_sep = unescape(p["headers.key.separator"])
        self.ignore_error = p["ignore.error"].lower() == "true"
        self.null_marker = p.get("null.marker")

    def _null(self, s: str) -> str | None:
        return None if self.null_marker is not None and s == self.null_marker else s

    def parse(
        self, line: str, n: int
    ) -> tuple[list[tuple[str, bytes | None]], str | None, str | None]:
        headers: list[tuple[str, bytes | None]] = []
        rest = line
        if self.parse_headers:
            h, sep, rest = line.partition(self.h_delim)
            if not sep:
                if not self.ignore_error:
                    raise CliError(f"No headers delimiter found on line number {n}: '{line}'")
                rest = line
            elif h and h != self.null_marker:
                for pair in h.split(self.h_sep):
                    k, s2, v = pair.partition(self.h_key_sep)
                    if not s2:
                        raise CliError(
                            f"No header key separator found in pair '{pair}' on line number {n}"
                        )
                    val = self._null(v)
                    headers.append((k, None if val is None else val.encode()))
        key: str | None = None
        value: str | None = rest
        if self.parse_key:
            k, sep, v = rest.partition(self.key_sep)
            if not sep:
                if not self.ignore_error:
                    raise CliError(f"No key separator found on line number {n}: '{rest}'")
                k, v = "", rest
            key, value = self._null(k), self._null(v)
        else:
            value = self._null(rest)
        return headers, key, value


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer

    extra: dict[str, Any] = {
        "acks": _ACKS.get(str(args.request_required_acks), args.request_required_acks)
    }
    if args.compression_codec:
        extra["compression.type"] = args.compression_codec
    if args.batch_size:
        extra["batch.size"] = args.batch_size
    if args.timeout is not None:
        extra["linger.ms"] = args.timeout
    extra.update(load_properties(args.producer_config))
    extra.update(kv_pairs(args.producer_property, "--producer-property"))
    reader = LineReader(
        {
            **kv_pairs(args.property, "--property"),
            **kv_pairs(args.reader_property, "--reader-property"),
        }
    )
    p = Producer(client_config(args, **extra))
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err.str())

    n = 0
    for n, raw in enumerate(sys.stdin, start=1):
        line = raw[:-1] if raw.endswith("\n") else raw
        headers, key, value = reader.parse(line, n)
        kw: dict[str, Any] = {"value": value, "key": key, "on_delivery": delivered}
        if headers:
            kw["headers"] = headers
        if args.partition is not None:
            kw["partition"] = args.partition
        while True:
            try:
                p.produce(args.topic, **kw)
                break
            except BufferError:
                p.poll(0.1)
        if args.sync:
            p.flush()
        else:
            p.poll(0)
        if errors:
            break
    left = p.flush(30)
    if errors or left:
        msg = errors[0] if errors else f"{left} records not delivered within 30 s"
        raise CliError(f"Error when sending message to topic {args.topic}: {msg}")
    return 0
