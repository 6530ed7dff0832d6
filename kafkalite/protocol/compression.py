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

Decompression is bounded: a batch of a few KiB can claim gigabytes. Every
codec decompresses into a buffer of bounded size (cramjam stops writing when it
is full), growing from a size hint up to ``max_output``.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from types import ModuleType

import cramjam

from kafkalite.protocol.record_batch import (
    CorruptRecordBatch,
    InvalidRecordBatch,
    UnsupportedCompression,
)

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

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024  # xerial SnappyOutputStream default, as Kafka uses it

_I32 = struct.Struct(">i")
_MIN_GUESS = 64 * 1024
_MAX_HINT_RATIO = 1032  # deflate's best ratio; beyond it a declared size is not believed


class CorruptCompressedData(CorruptRecordBatch):
    """The compressed records section does not decompress."""


class DecompressedSizeExceeded(InvalidRecordBatch):
    """Decompressed data would exceed ``max_output`` (a compression bomb, or a too large batch)."""

    error_code = 10  # RECORD_TOO_LARGE


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
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


# --- decompression ----------------------------------------------------------------


def decompress(codec: int, data: Buffer, *, max_output: int = DEFAULT_MAX_OUTPUT) -> bytes:
    """Decompress a records section; raise CorruptCompressedData or DecompressedSizeExceeded."""
    c = _codec(codec)
    data = memoryview(data).cast("B")  # any buffer (cramjam.Buffer too); the hints index it
    if c is CompressionType.NONE:
        if len(data) > max_output:
            raise DecompressedSizeExceeded(f"{len(data)} bytes exceed the {max_output} limit")
        return bytes(data)
    if c is CompressionType.SNAPPY:
        return snappy_decompress(data, max_output=max_output)
    module: ModuleType
    if c is CompressionType.GZIP:
        module, hint = cramjam.gzip, _gzip_size_hint(data)
    elif c is CompressionType.LZ4:
        module, hint = cramjam.lz4, _lz4_size_hint(data)
    else:
        module, hint = cramjam.zstd, _zstd_size_hint(data)
    return _bounded(module, c.kafka_name, data, hint, max_output)


def _bounded(
    module: ModuleType, name: str, data: Buffer, hint: int | None, max_output: int
) -> bytes:
    """Decompress into a fixed buffer, growing it x4 from the hint until ``max_output``.

    cramjam's ``decompress_into`` stops with "failed to write whole buffer" once
    the buffer is full, so work and memory never exceed the buffer size. A wrong
    hint only costs a retry.
    """
    # A hint is attacker-controlled: trust it only up to what a real stream of this size
    # could plausibly hold, or a 100-byte batch could make us allocate max_output.
    plausible = _MIN_GUESS + _MAX_HINT_RATIO * len(data)
    if hint is None:
        hint = max(_MIN_GUESS, 4 * len(data))
    size = min(max_output, plausible, max(hint, 1))
    while True:
        out = bytearray(size)
        try:
            n = module.decompress_into(data, out)
        except (cramjam.DecompressionError, OSError, ValueError) as e:
            if "write whole buffer" not in str(e):
                raise CorruptCompressedData(f"{name} data does not decompress: {e}") from None
            if size >= max_output:
                raise DecompressedSizeExceeded(
                    f"{name} data decompresses to more than {max_output} bytes"
                ) from None
            size = min(max_output, size * 4)
            continue
        del out[n:]
        return bytes(out)


def _gzip_size_hint(data: Buffer) -> int | None:
    # ISIZE trailer: input size mod 2**32 of the last member; a hint, not a promise.
    if len(data) < 18:
        return None
    return int.from_bytes(data[-4:], "little")


def _lz4_size_hint(data: Buffer) -> int | None:
    # Frame: magic(4) FLG BD [content size u64 if FLG bit 3]. Kafka's Java writer omits it.
    if len(data) < 14 or bytes(data[:4]) != b"\x04\x22\x4d\x18" or not data[4] & 0x08:
        return None
    return int.from_bytes(data[6:14], "little")


_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)


def _zstd_size_hint(data: Buffer) -> int | None:
    # Frame header: magic(4) FHD [window] [dict id] [frame content size].
    if len(data) < 6 or bytes(data[:4]) != b"\x28\xb5\x2f\xfd":
        return None
    fhd = data[4]
    fcs_flag = fhd >> 6
    single_segment = (fhd >> 5) & 1
    pos = 5 + (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZES[fhd & 3]
    if fcs_flag == 0:
        if not single_segment:
            return None
        size = 1
    else:
        size = 1 << fcs_flag
    if len(data) < pos + size:
        return None
    value = int.from_bytes(data[pos : pos + size], "little")
    return value + 256 if size == 2 else value


def snappy_decompress(data: Buffer, *, max_output: int = DEFAULT_MAX_OUTPUT) -> bytes:
    """Decompress xerial-framed snappy (Java clients) or raw snappy (librdkafka)."""
    mv = memoryview(data).cast("B")
    if len(mv) >= 16 and mv[:8] == XERIAL_MAGIC:
        return _xerial_decompress(mv, max_output)
    try:
        n = cramjam.snappy.decompress_raw_len(mv)
        if n > max_output:
            raise DecompressedSizeExceeded(f"snappy data claims {n} bytes, over {max_output}")
        out = bytearray(n)
        written = cramjam.snappy.decompress_raw_into(mv, out)
    except (cramjam.DecompressionError, OSError, ValueError) as e:
        raise CorruptCompressedData(f"snappy data does not decompress: {e}") from None
    if written != n:
        raise CorruptCompressedData("snappy data is shorter than its declared length")
    return bytes(out)


def _xerial_decompress(mv: memoryview, max_output: int) -> bytes:
    # Blocks declare their raw length up front, so the total is known (and bounded) before
    # any decompression. Version/compat are ignored: some producers write them little-endian.
    blocks: list[tuple[memoryview, int]] = []
    total = 0
    pos = 16
    end = len(mv)
    try:
        while pos < end:
            if mv[pos] == 0x82 and mv[pos : pos + 8] == XERIAL_MAGIC:
                pos += 16  # concatenated stream: a fresh header (a length is never negative)
                continue
            if pos + 4 > end:
                raise CorruptCompressedData("truncated xerial snappy block length")
            length = _I32.unpack_from(mv, pos)[0]
            pos += 4
            if length < 0 or pos + length > end:
                raise CorruptCompressedData("xerial snappy block overruns the data")
            block = mv[pos : pos + length]
            pos += length
            n = cramjam.snappy.decompress_raw_len(block)
            total += n
            if total > max_output:
                raise DecompressedSizeExceeded(f"snappy data decompresses to over {max_output}")
            blocks.append((block, n))
        out = bytearray(total)
        omv = memoryview(out)
        at = 0
        for block, n in blocks:
            if cramjam.snappy.decompress_raw_into(block, omv[at : at + n]) != n:
                raise CorruptCompressedData("snappy block is shorter than its declared length")
            at += n
        omv.release()
    except (cramjam.DecompressionError, OSError, ValueError) as e:
        raise CorruptCompressedData(f"xerial snappy data does not decompress: {e}") from None
    return bytes(out)
