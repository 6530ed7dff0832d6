"""A topic's ``compression.type`` applied to produced batches (Kafka's LogValidator).

A topic whose ``compression.type`` is a codec (not ``producer``) stores every batch
with that codec, whatever the producer used: a consumer of a ``gzip`` topic gets
gzip batches. The records section is re-encoded as a whole; the records inside,
the batch's offsets, timestamps, producer id/epoch/sequence and the non-codec
attribute bits stay as produced, so idempotence and offsets work as before.
"""

from __future__ import annotations

import struct

from kafkalite.protocol.compression import CompressionType, compress, decompress
from kafkalite.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CRC_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    compute_crc,
    iter_batch_positions,
)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


def needs_recompression(
    buf: bytes | bytearray | memoryview, target: CompressionType | None
) -> bool:
    """Does any batch in ``buf`` use a codec other than ``target`` (None: keep the producer's)?"""
    if target is None:
        return False
    return any(
        _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0] & COMPRESSION_CODEC_MASK != target
        for pos, _size in iter_batch_positions(buf)
    )


def recompress_batches(
    buf: bytes | bytearray | memoryview, target: CompressionType, *, level: int | None = None
) -> bytearray:
    """Every batch of ``buf`` re-encoded with ``target``; batches already in it are copied."""
    out = bytearray()
    mv = memoryview(buf)
    for pos, size in iter_batch_positions(buf):
        attrs = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
        source = attrs & COMPRESSION_CODEC_MASK
        if source == target:
            out += mv[pos : pos + size]
            continue
        records = mv[pos + RECORDS_OFFSET : pos + size]
        raw = records if source == CompressionType.NONE else decompress(source, records)
        body = bytes(raw) if target == CompressionType.NONE else compress(target, raw, level=level)
        start = len(out)
        out += mv[pos : pos + RECORDS_OFFSET]
        out += body
        new_size = len(out) - start
        _I32.pack_into(out, start + LENGTH_OFFSET, new_size - LOG_OVERHEAD)
        _I16.pack_into(out, start + ATTRIBUTES_OFFSET, (attrs & ~COMPRESSION_CODEC_MASK) | target)
        _U32.pack_into(out, start + CRC_OFFSET, compute_crc(out, start, new_size))
    return out
