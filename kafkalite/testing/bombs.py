"""Decompression bombs: small produce batches that inflate to gigabytes.

Built without ever holding the inflated bytes: the records section is
generated in pieces and fed to each codec's streaming compressor (snappy is
written by hand: its frames and copy operations are simple). Used by the bomb
tests and ``bench/bomb_bench.py``.

Every batch is valid: right CRC, count and offsets; its records are well
formed (null key, a value of zeros, no headers), so a broker that checks it
completely stores it, as Kafka does, unless a limit says otherwise.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from typing import Any

import cramjam

from kafkalite.protocol import record_batch as rb
from kafkalite.protocol.compression import XERIAL_BLOCK_SIZE, XERIAL_HEADER
from kafkalite.protocol.records import build_batch

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
#: codec names for the bench and test ids: xerial is how Java writes snappy, raw
#: how librdkafka does
CODECS = {"gzip": GZIP, "snappy-xerial": SNAPPY, "snappy-raw": SNAPPY, "lz4": LZ4, "zstd": ZSTD}

_ZEROS = bytes(1 << 20)
_I32 = struct.Struct(">i")


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _svarint(value: int) -> bytes:
    return _uvarint((value << 1) ^ (value >> 63))


def record_prefix(index: int, value_bytes: int) -> bytes:
    """A record up to its value: length, attributes, deltas, null key, value length."""
    body = b"\x00" + _svarint(0) + _svarint(index) + _svarint(-1) + _svarint(value_bytes)
    return _svarint(len(body) + value_bytes + 1) + body


def section_pieces(count: int, value_bytes: int) -> Iterator[bytes]:
    """The uncompressed records section of ``count`` records of ``value_bytes`` zeros,
    in pieces of about a MiB."""
    if value_bytes >= len(_ZEROS):
        for i in range(count):
            yield record_prefix(i, value_bytes)
            left = value_bytes
            while left:
                n = min(left, len(_ZEROS))
                yield _ZEROS[:n]
                left -= n
            yield b"\x00"  # no headers
        return
    chunk = bytearray()
    for i in range(count):
        chunk += record_prefix(i, value_bytes)
        chunk += _ZEROS[:value_bytes]
        chunk += b"\x00"
        if len(chunk) >= len(_ZEROS):
            yield bytes(chunk)
            chunk.clear()
    if chunk:
        yield bytes(chunk)


def _xerial(pieces: Iterator[bytes]) -> bytes:
    """xerial framing, 32 KiB blocks; all-zero blocks are compressed once."""
    out = bytearray(XERIAL_HEADER)
    zero_block = bytes(XERIAL_BLOCK_SIZE)
    zero_packed = bytes(cramjam.snappy.compress_raw(zero_block))
    pending = bytearray()

    def emit(block: bytes) -> None:
        packed = zero_packed if block == zero_block else bytes(cramjam.snappy.compress_raw(block))
        out.extend(_I32.pack(len(packed)))
        out.extend(packed)

    for piece in pieces:
        pending += piece
        whole = len(pending) - len(pending) % XERIAL_BLOCK_SIZE
        for at in range(0, whole, XERIAL_BLOCK_SIZE):
            emit(bytes(pending[at : at + XERIAL_BLOCK_SIZE]))
        del pending[:whole]
    if pending:
        emit(bytes(pending))
    return bytes(out)


def _literal(data: bytes) -> bytes:
    n = len(data) - 1
    if n < 60:
        return bytes((n << 2,)) + data
    if n < 256:
        return b"\xf0" + bytes((n,)) + data
    return b"\xf4" + n.to_bytes(2, "little") + data


def raw_snappy_single_record(value_bytes: int) -> bytes:
    """One raw snappy block (librdkafka's form) of a record whose value is zeros:
    a literal, then 3-byte copies of 64 zeros (snappy's best ratio, about 21x)."""
    prefix = record_prefix(0, value_bytes)
    head = min(value_bytes, 64)
    ops = [_literal(prefix + bytes(head))]
    copies, rest = divmod(value_bytes - head, 64)
    ops.append(b"\xfe\x40\x00" * copies)  # copy 64 bytes from 64 back
    ops.append(_literal(bytes(rest) + b"\x00"))
    return _uvarint(len(prefix) + value_bytes + 1) + b"".join(ops)


def section(codec_name: str, count: int, value_bytes: int) -> bytes:
    """The compressed records section of ``count`` records of ``value_bytes`` zeros."""
    if codec_name == "snappy-raw":
        if count != 1:
            raise ValueError("a raw snappy bomb holds one record")
        return raw_snappy_single_record(value_bytes)
    pieces = section_pieces(count, value_bytes)
    if codec_name == "snappy-xerial":
        return _xerial(pieces)
    compressor: Any = {
        "gzip": lambda: cramjam.gzip.Compressor(level=9),
        "lz4": lambda: cramjam.lz4.Compressor(level=9, content_checksum=False, block_linked=False),
        "zstd": lambda: cramjam.zstd.Compressor(level=3),
    }[codec_name]()
    for piece in pieces:
        compressor.compress(piece)
    return bytes(compressor.finish())


def bomb_batch(codec_name: str, count: int, value_bytes: int) -> bytes:
    """A produce batch (valid CRC, base offset 0) whose ``count`` records of
    ``value_bytes`` zeros are compressed with ``codec_name`` (a key of CODECS)."""
    return with_section(CODECS[codec_name], count, section(codec_name, count, value_bytes))


def with_section(codec: int, count: int, compressed: bytes) -> bytes:
    """A batch header claiming ``count`` records over an arbitrary ``compressed`` section."""
    template = build_batch([(None, b"")], timestamp_ms=int(time.time() * 1000))
    out = bytearray(template[: rb.RECORDS_OFFSET]) + compressed
    _I32.pack_into(out, rb.LENGTH_OFFSET, len(out) - rb.LOG_OVERHEAD)
    attrs = struct.unpack_from(">h", out, rb.ATTRIBUTES_OFFSET)[0]
    struct.pack_into(">h", out, rb.ATTRIBUTES_OFFSET, (attrs & ~rb.COMPRESSION_CODEC_MASK) | codec)
    _I32.pack_into(out, rb.LAST_OFFSET_DELTA_OFFSET, count - 1)
    _I32.pack_into(out, rb.RECORDS_COUNT_OFFSET, count)
    struct.pack_into(">I", out, rb.CRC_OFFSET, rb.compute_crc(out, 0, len(out)))
    return bytes(out)
