"""The frame attack classes: well-formed requests of every API and version, then
mutations of their counts, lengths, varints, headers and record batches.

Every class starts from a request kio builds for an API and version the broker
advertises (:class:`Requests`), so the mutated bytes sit where a decoder or a
handler trusts them. Frames keep a correct size prefix: a prefix that lies is
a connection pattern (a stalled read), not a frame.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import crc32c

from kafkalite.protocol import messages
from kafkalite.protocol import record_batch as rb
from kafkalite.protocol.compression import compress
from kafkalite.protocol.records import build_batch
from kafkalite.testing.fuzz.attack import FrameAttack, FuzzFrame, FuzzTarget, frame_bytes, register
from kafkalite.testing.fuzz.sites import Site, encode_length, find_sites, replace
from kafkalite.testing.fuzz.values import ValueBuilder, timestamp_ms

#: the inter-broker controller APIs: kio has no schemas for them (``control`` owns them)
_NO_SCHEMA = frozenset({4, 5, 6, 7})


@dataclass(frozen=True, slots=True)
class Built:
    api_key: int
    version: int
    cls: type
    body: bytes
    flexible: bool
    correlation_id: int

    def frame(self, body: bytes | None = None, note: str = "") -> FuzzFrame:
        data = frame_bytes(
            self.api_key,
            self.version,
            self.correlation_id,
            self.body if body is None else body,
            flexible=self.flexible,
        )
        return FuzzFrame(data, self.api_key, self.version, note)


class Requests:
    """Well-formed random requests of the target's advertised APIs and versions."""

    def __init__(self, rng: random.Random, target: FuzzTarget) -> None:
        self.rng = rng
        self.values = ValueBuilder(rng, target.pools)
        self.choices: list[tuple[int, int]] = []
        for key, (lo, hi) in sorted(target.apis.items()):
            if key in _NO_SCHEMA or key in target.exclude_apis:
                continue
            for v in range(lo, hi + 1):
                try:
                    messages.request_type(key, v)
                except Exception:  # a version kio does not know
                    continue
                self.choices.append((key, v))

    def build(self, api_key: int | None = None) -> Built:
        rng = self.rng
        while True:
            if api_key is None:
                key, version = rng.choice(self.choices)
            else:
                version = rng.choice([v for k, v in self.choices if k == api_key])
                key = api_key
            cls = messages.request_type(key, version)
            try:
                body = messages.encode(self.values.build(cls))
            except (ValueError, OverflowError, TypeError):  # a value kio's writer refuses
                continue
            return Built(
                key,
                version,
                cls,
                body,
                messages.is_flexible_request(key, version),
                rng.randint(0, 2**31 - 1),
            )


class _FromRequests(FrameAttack):
    """Base: a stream of built requests, each turned into frames by :meth:`mutate`."""

    def frames(self, rng: random.Random, target: FuzzTarget) -> Iterator[FuzzFrame]:
        requests = Requests(rng, target)
        while True:
            built = requests.build()
            frame = self.mutate(rng, built)
            if frame is not None:
                yield frame

    def mutate(self, rng: random.Random, built: Built) -> FuzzFrame | None:
        raise NotImplementedError


@register
class ValidRequests(_FromRequests):
    """Well-formed requests with edge values: what handlers must answer, not raise on."""

    name = "valid"

    def mutate(self, rng: random.Random, built: Built) -> FuzzFrame | None:
        return built.frame(note="well-formed")


@register
class LongStrings(_FromRequests):
    """Every string 32767 bytes (the most Kafka reads): responses that echo them must fit."""

    name = "long-strings"

    def mutate(self, rng: random.Random, built: Built) -> FuzzFrame | None:
        body = built.body
        sites = [s for s in find_sites(built.cls, body) if s.kind == "string" and s.value >= 0]
        if not sites:
            return None
        n = rng.choice((32767, 32767, 255, 32766))
        for site in sorted(sites, key=lambda s: s.pos, reverse=True):
            longer = encode_length(site, n) + b"x" * n
            body = body[: site.pos] + longer + body[site.pos + site.width + site.value :]
        return built.frame(body, f"{len(sites)} strings of {n} bytes")


def _pick(rng: random.Random, sites: list[Site], *kinds: str) -> Site | None:
    chosen = [s for s in sites if s.kind in kinds]
    return rng.choice(chosen) if chosen else None


@register
class Counts(_FromRequests):
    """Array counts that lie: huge, null, negative, one more than present."""

    name = "counts"

    def mutate(self, rng: random.Random, built: Built) -> FuzzFrame | None:
        site = _pick(rng, find_sites(built.cls, built.body), "array")
        if site is None:
            return None
        value = rng.choice(
            (-1, -1, -2, 0, site.value + 1, site.value + 1000, 2**31 - 1, 2**32 - 2, 2**24)
        )
        new = encode_length(site, value)
        return built.frame(replace(built.body, site, new), f"{site.path} count {value}")


@register
class Lengths(_FromRequests):
    """String and bytes lengths that lie: null, negative, past the frame, over 32767."""

    name = "lengths"

    def mutate(self, rng: random.Random, built: Built) -> FuzzFrame | None:
        site = _pick(rng, find_sites(built.cls, built.body), "string", "bytes")
        if site is None:
            return None
        if rng.random() < 0.2 and site.compact:  # a real string past Kafka's limit
            n = 32768
            body = (
                built.body[: site.pos]
                + encode_length(site, n)
                + b"y" * n
                + built.body[site.pos + site.width + max(site.value, 0) :]
            )
            return built.frame(body, f"{site.path} of {n} bytes")
        value = rng.choice((-1, -1, -2, -32768, site.value + 1, site.value + 5000, 2**31 - 1))
        new = encode_length(site, value)
        return built.frame(replace(built.body, site, new), f"{site.path} length {value}")


@register
class Varints(_FromRequests):
    """Compact lengths and tag counts as over-long or out-of-range varints."""

    name = "varints"

    def mutate(self, rng: random.Random, built: Built) -> FuzzFrame | None:
        sites = [s for s in find_sites(built.cls, built.body) if s.compact]
        if not sites:
            return None
        site = rng.choice(sites)
        raw = site.value + 1
        choice = rng.randrange(4)
        if choice == 0:  # the same value, padded to 6+ bytes (Kafka: at most 5)
            width = rng.randint(6, 10)
            new = bytes([(raw >> (7 * i)) & 0x7F | 0x80 for i in range(width - 1)]) + b"\x00"
        elif choice == 1:  # the same value in 5 bytes (legal, unusual)
            new = bytes([(raw >> (7 * i)) & 0x7F | 0x80 for i in range(4)]) + bytes([raw >> 28])
        elif choice == 2:  # bits above 32 in the 5th byte
            new = b"\xff\xff\xff\xff\x7f"
        else:  # a varint the frame ends inside
            return built.frame(built.body[: site.pos] + b"\x80\x80", f"{site.path} cut varint")
        return built.frame(replace(built.body, site, new), f"{site.path} varint {new.hex()}")


@register
class Truncated(_FromRequests):
    """A body cut short (the size prefix says so)."""

    name = "truncate"

    def mutate(self, rng: random.Random, built: Built) -> FuzzFrame | None:
        if not built.body:
            return None
        cut = rng.randrange(len(built.body))
        return built.frame(built.body[:cut], f"cut at {cut} of {len(built.body)}")


@register
class Garbage(_FromRequests):
    """Bytes after the body (Kafka ignores them) or a body of random bytes."""

    name = "garbage"

    def mutate(self, rng: random.Random, built: Built) -> FuzzFrame | None:
        extra = rng.randbytes(rng.choice((1, 7, 64, 1000)))
        if rng.random() < 0.3:
            return built.frame(extra, f"random body of {len(extra)} bytes")
        return built.frame(built.body + extra, f"{len(extra)} bytes appended")


@register
class BitFlips(_FromRequests):
    """A few flipped bits anywhere in the body."""

    name = "bitflip"

    def mutate(self, rng: random.Random, built: Built) -> FuzzFrame | None:
        if not built.body:
            return None
        body = bytearray(built.body)
        flips = []
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(body))
            bit = rng.randrange(8)
            body[i] ^= 1 << bit
            flips.append(f"{i}.{bit}")
        return built.frame(bytes(body), "flipped " + ",".join(flips))


@register
class Versions(FrameAttack):
    """Unknown API keys, unsupported versions (ApiVersions gets its v0 fallback)."""

    name = "versions"

    def frames(self, rng: random.Random, target: FuzzTarget) -> Iterator[FuzzFrame]:
        keys = sorted(target.apis)
        while True:
            r = rng.random()
            if r < 0.3:
                key = rng.choice((-1, -32768, 32767, 100, 1000, max(keys) + 1, 4, 5, 6, 7))
                version = rng.randint(0, 20)
            else:
                key = 18 if r < 0.5 else rng.choice(keys)
                lo, hi = target.apis[key]
                version = rng.choice((hi + 1, hi + 5, 32767, -1, lo - 1 if lo else -2))
            body = rng.randbytes(rng.choice((0, 4, 40)))
            yield FuzzFrame(
                frame_bytes(key, version, rng.randint(0, 2**31 - 1), body, flexible=True),
                key,
                version,
                f"api {key} v{version}",
            )


@register
class Headers(FrameAttack):
    """Request headers that lie: short frames, client_id lengths, header tag sections."""

    name = "header"

    def frames(self, rng: random.Random, target: FuzzTarget) -> Iterator[FuzzFrame]:
        requests = Requests(rng, target)
        while True:
            built = requests.build()
            payload = built.frame().data[4:]
            choice = rng.randrange(5)
            if choice == 0:  # shorter than a header
                payload = payload[: rng.randrange(10)]
                note = f"{len(payload)}-byte frame"
            elif choice == 1:  # client_id length lies
                n = rng.choice((-2, -32768, 32767, min(len(payload), 32767)))
                payload = payload[:8] + struct.pack(">h", n) + payload[10:]
                note = f"client_id length {n}"
            elif choice == 2:  # client_id that is not UTF-8
                payload = payload[:8] + b"\x00\x02\xff\xfe" + payload[14:]
                note = "client_id not UTF-8"
            elif choice == 3 and built.flexible:  # header tag section that lies
                at = 10 + struct.unpack_from(">h", payload, 8)[0]
                tags = rng.choice((b"\x01\x00\x7f", b"\xff\xff\xff\xff\x0f", b"\x02\x00\x00"))
                payload = payload[:at] + tags + payload[at + 1 :]
                note = f"header tags {tags.hex()}"
            else:
                payload = payload[:8] + b"\xff\xff" + payload[10 + len(b"fuzz") :]
                note = "null client_id"
            yield FuzzFrame(
                struct.pack(">i", len(payload)) + payload, built.api_key, built.version, note
            )


# --- record batches inside Produce ------------------------------------------------------

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _recrc(batch: bytearray) -> bytes:
    """The batch with its CRC-32C recomputed, so it reaches record validation."""
    if len(batch) >= rb.HEADER_SIZE:
        struct.pack_into(
            ">I", batch, rb.CRC_OFFSET, crc32c.crc32c(memoryview(batch)[rb.ATTRIBUTES_OFFSET :])
        )
    return bytes(batch)


def _record_bytes(rng: random.Random) -> bytes:
    """One record's body whose fields lie (length prefix added by the caller)."""
    out = bytearray(b"\x00")  # attributes
    choice = rng.randrange(6)
    out += b"\x00"  # timestamp delta
    if choice == 0:  # offset delta 2**31-1
        out += b"\xfe\xff\xff\xff\x0f"
    else:
        out += b"\x00"
    if choice == 1:  # key length -7
        out += b"\x0d"
    elif choice == 2:  # over-long varint
        out += b"\xff\xff\xff\xff\xff\xff\x01"
    elif choice == 3:  # key length past the record
        out += b"\xfe\x01"
    else:
        out += b"\x02k"
    out += b"\x02v"  # value
    out += b"\x00" if choice != 4 else b"\xfe\xff\xff\xff\x0f"  # header count
    return bytes(out)


def mutated_batch(rng: random.Random) -> tuple[bytes, str]:
    """A record batch with one field that lies and a correct CRC."""
    recs = [(b"k", rng.randbytes(rng.choice((1, 50)))) for _ in range(rng.randint(1, 3))]
    codec = rng.choice((0, 0, 1, 2, 3, 4))
    batch = bytearray(build_batch(recs, compression=codec, timestamp_ms=timestamp_ms(rng)))
    choice = rng.randrange(9)
    if choice == 0:
        n = rng.choice((0, 2**31 - 1, -1, len(recs) + 1, 10**6))
        struct.pack_into(">i", batch, rb.RECORDS_COUNT_OFFSET, n)
        note = f"record count {n}"
    elif choice == 1:
        delta = rng.choice((-1, 2**31 - 1, len(recs) + 5))
        struct.pack_into(">i", batch, rb.LAST_OFFSET_DELTA_OFFSET, delta)
        note = f"last offset delta {delta}"
    elif choice == 2:
        attrs = rng.choice((5, 6, 7, rb.CONTROL_FLAG_MASK, rb.TRANSACTIONAL_FLAG_MASK, -1))
        struct.pack_into(">h", batch, rb.ATTRIBUTES_OFFSET, attrs)
        note = f"attributes {attrs:#x}"
    elif choice == 3:
        batch[rb.MAGIC_OFFSET] = rng.choice((0, 1, 3, 0xFF))
        note = f"magic {batch[rb.MAGIC_OFFSET]}"
    elif choice == 4:  # records section replaced by records that lie
        body = bytearray()
        for _ in range(rng.randint(1, 2)):
            rec = _record_bytes(rng)
            body += bytes([len(rec) << 1]) + rec
        payload = compress(codec, bytes(body)) if codec else bytes(body)
        batch = batch[: rb.HEADER_SIZE] + payload
        struct.pack_into(">i", batch, rb.LENGTH_OFFSET, len(batch) - rb.LOG_OVERHEAD)
        struct.pack_into(">i", batch, rb.RECORDS_COUNT_OFFSET, 1)
        note = f"lying records, codec {codec}"
    elif choice == 5:  # compressed data that is not what the codec says
        payload = rng.randbytes(rng.choice((1, 16, 200)))
        batch = batch[: rb.HEADER_SIZE] + payload
        struct.pack_into(">i", batch, rb.LENGTH_OFFSET, len(batch) - rb.LOG_OVERHEAD)
        struct.pack_into(">h", batch, rb.ATTRIBUTES_OFFSET, rng.randint(1, 4))
        note = "random compressed payload"
    elif choice == 6:  # a small bomb: 4 MiB of zeros, one record claimed
        codec = rng.randint(1, 4)
        payload = compress(codec, bytes(4 << 20))
        batch = batch[: rb.HEADER_SIZE] + payload
        struct.pack_into(">i", batch, rb.LENGTH_OFFSET, len(batch) - rb.LOG_OVERHEAD)
        struct.pack_into(">h", batch, rb.ATTRIBUTES_OFFSET, codec)
        note = f"4 MiB of zeros, codec {codec}"
    elif choice == 7:
        n = rng.choice((-1, 0, 8, len(batch) + 100, 2**31 - 1))
        struct.pack_into(">i", batch, rb.LENGTH_OFFSET, n)
        note = f"batch length {n}"
    else:
        cut = rng.randrange(len(batch))
        batch = batch[:cut]
        note = f"batch cut at {cut}"
    return _recrc(batch), note


@register
class RecordBatches(FrameAttack):
    """Produce requests whose record batch lies in one field, CRC recomputed."""

    name = "records"

    def frames(self, rng: random.Random, target: FuzzTarget) -> Iterator[FuzzFrame]:
        versions = target.apis.get(0)
        if versions is None:
            return
        lo, hi = max(versions[0], 3), versions[1]
        while True:
            version = rng.randint(lo, hi)
            batch, note = mutated_batch(rng)
            request: dict[str, Any] = {
                "transactional_id": None,
                "acks": rng.choice((1, -1)),
                "timeout": 1000,
                "topic_data": [
                    {
                        "name": rng.choice(target.pools.topics),
                        "partition_data": [{"index": 0, "records": batch}],
                    }
                ],
            }
            body = messages.encode(messages.build(messages.request_type(0, version), request))
            data = frame_bytes(
                0,
                version,
                rng.randint(0, 2**31 - 1),
                body,
                flexible=messages.is_flexible_request(0, version),
            )
            yield FuzzFrame(data, 0, version, note)
