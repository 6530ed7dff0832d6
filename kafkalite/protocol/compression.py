"""Record batch compression codecs, all through cramjam.

Kafka compresses the records section of a v2 batch as one unit; the codec id
lives in attribute bits 0-2. Two codecs need care to interoperate:

* **snappy** - the Java client writes xerial framing (``\\x82SNAPPY\\x00``,
  version and compat int32s, then ``[int32 length][raw snappy block]``
  chunks of up to 32 KiB of input) while librdkafka may write raw snappy.
  We read both and write xerial, like the Java producer, because every client
  reads xerial.
* **lz4** - the LZ4 *frame* format with independent blocks (KIP-57); Kafka's
  Java reader rejects linked blocks.

Decompression is streaming and bounded (:mod:`kafkalite.protocol.decompression`):
a batch of a few KiB can claim gigabytes, and no size it claims is believed.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import cramjam

from kafkalite.common import structs
from kafkalite.protocol.decompression import (
    XERIAL_MAGIC,
    CorruptCompressedData,
    DecompressedSizeExceeded,
    open_stream,
    read_all,
)
from kafkalite.protocol.record_batch import UnsupportedCompression

__all__ = [
    "COMPRESSION_TYPE_NAMES",
    "CompressionType",
    "CorruptCompressedData",
    "DecompressedSizeExceeded",
    "compress",
    "decompress",
    "parse_compression_type",
    "resolve_compression",
    "snappy_decompress",
    "snappy_xerial_compress",
]

Buffer = bytes | bytearray | memoryview

DEFAULT_MAX_OUTPUT = 1 << 31
"""Default cap on decompressed size; callers handling untrusted input should pass less."""


class CompressionType(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def kafka_name(self) -> str:
        """The producer ``compression.type`` spelling (``none``, ``gzip`` ...)."""
        return self.name.lower()


# Topic/broker ``compression.type`` values; ``producer`` (None) keeps the producer's codec.
COMPRESSION_TYPE_NAMES: dict[str, CompressionType | None] = {
    "none": CompressionType.NONE,
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
    "producer": None,
}

# Kafka's defaults for compression.{gzip,lz4,zstd}.level (KIP-390); gzip -1 means zlib's 6.
DEFAULT_LEVELS: dict[CompressionType, int] = {
    CompressionType.GZIP: 6,
    CompressionType.LZ4: 9,
    CompressionType.ZSTD: 3,
}

XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024  # xerial SnappyOutputStream default, as Kafka uses it


def parse_compression_type(name: str) -> CompressionType | None:
    """Parse a Kafka ``compression.type`` value; ``None`` means ``producer``."""
    try:
        return COMPRESSION_TYPE_NAMES[name.strip().lower()]
    except KeyError:
        valid = ", ".join(COMPRESSION_TYPE_NAMES)
        raise ValueError(f"invalid compression.type {name!r}; expected one of {valid}") from None


def resolve_compression(config_value: str, producer_codec: int) -> CompressionType:
    """The codec a broker stores a batch with, given the topic's ``compression.type``."""
    codec = parse_compression_type(config_value)
    return CompressionType(producer_codec) if codec is None else codec


def _codec(codec: int) -> CompressionType:
    try:
        return CompressionType(codec)
    except ValueError:
        raise UnsupportedCompression(f"unknown compression codec id {codec}") from None


# --- compression ----------------------------------------------------------------


def compress(codec: int, data: Buffer, *, level: int | None = None) -> bytes:
    """Compress a records section the way Apache Kafka's Java producer would."""
    c = _codec(codec)
    if c is CompressionType.NONE:
        return bytes(data)
    if level is None:
        level = DEFAULT_LEVELS.get(c)
    if c is CompressionType.GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if c is CompressionType.SNAPPY:
        return snappy_xerial_compress(data)
    if c is CompressionType.LZ4:
        # Independent blocks (Kafka's reader refuses linked ones), no content checksum.
        comp = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        comp.compress(data if isinstance(data, bytes) else bytes(data))  # it takes bytes only
        return bytes(comp.finish())
    return bytes(cramjam.zstd.compress(data, level=level))


def snappy_xerial_compress(data: Buffer, block_size: int = XERIAL_BLOCK_SIZE) -> bytes:
    """xerial-framed snappy: a 16-byte header then ``[int32 len][raw block]`` chunks."""
    mv = memoryview(data).cast("B")
    out = bytearray(XERIAL_HEADER)
    for i in range(0, len(mv), block_size):
        block = cramjam.snappy.compress_raw(mv[i : i + block_size])
        out += structs.I32.pack(len(block))
        out += block
    return bytes(out)


# --- decompression ----------------------------------------------------------------


def decompress(codec: int, data: Buffer, *, max_output: int = DEFAULT_MAX_OUTPUT) -> bytes:
    """Decompress a records section whole; CorruptCompressedData, or
    DecompressedSizeExceeded past ``max_output`` (memory never exceeds what was
    produced, whatever the data claims). Streams: :mod:`.decompression`."""
    c = _codec(codec)
    if c is CompressionType.NONE:
        if len(data) > max_output:
            raise DecompressedSizeExceeded(f"{len(data)} bytes exceed the {max_output} limit")
        return bytes(data)
    return read_all(open_stream(c, data), max_output)


def snappy_decompress(data: Buffer, *, max_output: int = DEFAULT_MAX_OUTPUT) -> bytes:
    """Decompress xerial-framed snappy (Java clients) or raw snappy (librdkafka)."""
    return read_all(open_stream(CompressionType.SNAPPY, data), max_output)
