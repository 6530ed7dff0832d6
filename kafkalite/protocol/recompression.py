"""A topic's ``compression.type`` applied to produced batches (Kafka's LogValidator).

A topic whose ``compression.type`` is a codec (not ``producer``) stores every batch
with that codec, whatever the producer used: a consumer of a ``gzip`` topic gets
gzip batches. The records section is re-encoded as a whole; the records inside,
the batch's offsets, timestamps, producer id/epoch/sequence and the non-codec
attribute bits stay as produced, so idempotence and offsets work as before.

The produce path re-encodes while it validates (:class:`Recompressor` is fed the
decompressed section a window at a time), so a batch that inflates to a gigabyte
is never held whole: the output is bounded by ``max.message.bytes``, which Kafka
checks again after recompression (RECORD_TOO_LARGE), and the re-encoding stops
as soon as it passes it.
"""

from __future__ import annotations

from typing import Any

import cramjam

from kafkalite.common import structs
from kafkalite.protocol.compression import (
    DEFAULT_LEVELS,
    XERIAL_BLOCK_SIZE,
    XERIAL_HEADER,
    CompressionType,
    compress,
    decompress,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CRC_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    InvalidRecordBatch,
    compute_crc,
    iter_batch_positions,
)

Buffer = bytes | bytearray | memoryview


#: Sections up to this size are re-encoded in one call (byte-identical to
#: :func:`compress`); larger ones stream through the codec's compressor.
ONE_SHOT_BYTES = 4 << 20


class RecompressedTooLarge(InvalidRecordBatch):
    """The re-encoded batch exceeds ``max.message.bytes``."""

    error_code = ErrorCode.message_too_large  # Kafka's RecordTooLargeException


class Recompressor:
    """Re-encodes a records section fed to it in pieces, for a batch of at most
    ``max_batch_bytes`` (header included)."""

    __slots__ = (
        "target",
        "level",
        "max_batch_bytes",
        "_pending",
        "_pending_size",
        "_out",
        "_codec",
    )

    def __init__(self, target: int, level: int | None, max_batch_bytes: int) -> None:
        self.target = CompressionType(target)
        self.level = DEFAULT_LEVELS.get(self.target) if level is None else level
        self.max_batch_bytes = max_batch_bytes
        self._pending: list[Buffer] = []  # raw input not yet encoded
        self._pending_size = 0
        self._out = bytearray()
        self._codec: Any = None  # the streaming compressor, once the section is large

    def write(self, piece: Buffer) -> None:
        self._pending.append(piece)
        self._pending_size += len(piece)
        if self._codec is not None or self._pending_size > ONE_SHOT_BYTES:
            self._encode_pending()

    def finish(self) -> bytearray:
        """The re-encoded section."""
        if self._codec is None:
            raw = b"".join(self._pending)
            self._pending.clear()
            if self.target != CompressionType.NONE:
                raw = compress(self.target, raw, level=self.level)
            self._out += raw
        else:
            self._encode_pending()
            self._out += self._codec_finish()
        self._check()
        return self._out

    def _encode_pending(self) -> None:
        if self._codec is None:
            self._codec = self._open()
        for piece in self._pending:
            self._out += self._codec_write(piece)
        self._pending.clear()
        self._pending_size = 0
        self._check()

    def _check(self) -> None:
        size = RECORDS_OFFSET + len(self._out)
        if size > self.max_batch_bytes:
            raise RecompressedTooLarge(
                f"Message batch size re-encoded with {self.target.kafka_name} is at least {size} "
                f"bytes, which exceeds the maximum configured size of {self.max_batch_bytes}."
            )

    # --- the codecs' streaming compressors -------------------------------------------

    def _open(self) -> Any:
        t = self.target
        if t == CompressionType.GZIP:
            return cramjam.gzip.Compressor(level=self.level)
        if t == CompressionType.ZSTD:
            return cramjam.zstd.Compressor(level=self.level)
        if t == CompressionType.LZ4:
            # independent blocks, no content checksum: what compress() writes
            return cramjam.lz4.Compressor(
                level=self.level, content_checksum=False, block_linked=False
            )
        if t == CompressionType.SNAPPY:
            self._out += XERIAL_HEADER
            return bytearray()  # raw input waiting for a full 32 KiB xerial block
        return None  # NONE: the raw bytes are the output

    def _codec_write(self, piece: Buffer) -> Buffer:
        codec = self._codec
        t = self.target
        if t == CompressionType.NONE:
            return piece
        if t == CompressionType.SNAPPY:
            codec += piece
            whole = len(codec) - len(codec) % XERIAL_BLOCK_SIZE
            out = _xerial_blocks(memoryview(codec)[:whole])
            del codec[:whole]
            return out
        codec.compress(bytes(piece))  # cramjam's compressors take bytes
        return bytes(codec.flush())

    def _codec_finish(self) -> Buffer:
        codec = self._codec
        t = self.target
        if t == CompressionType.NONE:
            return b""
        if t == CompressionType.SNAPPY:
            out = _xerial_blocks(memoryview(codec))
            codec.clear()
            return out
        return bytes(codec.finish())


def _xerial_blocks(raw: memoryview) -> bytearray:
    out = bytearray()
    for i in range(0, len(raw), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(raw[i : i + XERIAL_BLOCK_SIZE])
        out += structs.I32.pack(len(block))
        out += block
    return out


def rebuild_batch(batch: Buffer, section: Buffer, target: int) -> bytearray:
    """``batch``'s header (61 bytes) over a new records ``section`` encoded with ``target``:
    length, codec bits and CRC rewritten, every other field as it was."""
    out = bytearray(memoryview(batch)[:RECORDS_OFFSET])
    out += section
    structs.I32.pack_into(out, LENGTH_OFFSET, len(out) - LOG_OVERHEAD)
    attrs = structs.I16.unpack_from(out, ATTRIBUTES_OFFSET)[0]
    structs.I16.pack_into(out, ATTRIBUTES_OFFSET, (attrs & ~COMPRESSION_CODEC_MASK) | target)
    structs.U32.pack_into(out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return out


def needs_recompression(
    buf: bytes | bytearray | memoryview, target: CompressionType | None
) -> bool:
    """Does any batch in ``buf`` use a codec other than ``target`` (None: keep the producer's)?"""
    if target is None:
        return False
    return any(
        structs.I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0] & COMPRESSION_CODEC_MASK != target
        for pos, _size in iter_batch_positions(buf)
    )


def recompress_batches(
    buf: bytes | bytearray | memoryview, target: CompressionType, *, level: int | None = None
) -> bytearray:
    """Every batch of ``buf`` re-encoded with ``target``; batches already in it are copied.

    For batches the broker trusts (the log's own writers); a produced batch is
    re-encoded by the record validator while it is checked.
    """
    out = bytearray()
    mv = memoryview(buf)
    for pos, size in iter_batch_positions(buf):
        attrs = structs.I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
        source = attrs & COMPRESSION_CODEC_MASK
        if source == target:
            out += mv[pos : pos + size]
            continue
        records = mv[pos + RECORDS_OFFSET : pos + size]
        raw = records if source == CompressionType.NONE else decompress(source, records)
        body = bytes(raw) if target == CompressionType.NONE else compress(target, raw, level=level)
        out += rebuild_batch(mv[pos : pos + size], body, target)
    return out
