"""Streaming, bounded decompression of a records section.

A produced batch of a few kilobytes can describe gigabytes: a zstd frame of
RLE blocks, a gzip stream of zeros, or a snappy preamble that simply claims
2 GiB. So no size a producer writes is believed. Each codec is read as a
stream, :meth:`DecompressStream.read` returning about ``n`` bytes at a time,
so a caller holds one window of the output, never the whole of it (Kafka's
LogValidator reads compressed batches the same way, through a stream that
skips keys and values).

* **gzip**: a first large read decodes the whole stream with cramjam when it fits
  (into a buffer of bounded size); otherwise zlib with an output bound per call.
  Concatenated members are read, as Java's ``GZIPInputStream`` does.
* **zstd**: the frame's blocks are walked (3-byte headers) and fed to a zstd
  stream decoder a few at a time, so no call can emit more than the blocks'
  sizes allow (a block decodes to at most 128 KiB); the walk also proves the
  input ends at a frame boundary. A frame's window is limited to
  :data:`MAX_ZSTD_WINDOW`, the decoders' default limit (zstd-jni, libzstd).
* **lz4**: the frame format through liblz4's frame decoder with an output bound
  per call (header, block and content checksums verified).
* **snappy**: xerial framing (Java clients) or one raw block (librdkafka). A
  snappy block cannot be decoded in pieces, so each block is decoded whole,
  after its claimed size is checked against the most its bytes can produce
  (a copy of 64 bytes costs 3) and against :data:`MAX_SNAPPY_BLOCK`.

Errors: :class:`CorruptCompressedData` (CORRUPT_MESSAGE) for data that does
not decode; :class:`DecompressedSizeExceeded` (RECORD_TOO_LARGE) for a bound.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Protocol

import cramjam
import lz4.frame
import zstandard

from kafkalite.common import structs
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.record_batch import CorruptRecordBatch, InvalidRecordBatch

Buffer = bytes | bytearray | memoryview

#: What one ``read`` aims to return (a hint; a zstd or snappy block may exceed it).
CHUNK = 1 << 20
#: Largest zstd window accepted: libzstd's and zstd-jni's default limit (windowLog 27).
MAX_ZSTD_WINDOW = 1 << 27
#: Largest snappy block decoded (each is decoded whole). Java writes 32 KiB
#: blocks; librdkafka writes one block of the whole batch, up to its
#: ``message.max.bytes``.
MAX_SNAPPY_BLOCK = 64 << 20
#: Most bytes one compressed snappy byte can stand for: a 3-byte copy tag of 64.
SNAPPY_MAX_RATIO = 22

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = 16

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4

_GZIP_INPUT_SLICE = 64 * 1024  # zlib copies the unconsumed rest of its input every call
_GZIP_ONE_SHOT_MIN = 1 << 20  # reads this large first try the whole stream in one call
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE = 0x184D2A50
_ZSTD_BLOCK_MAX = 128 * 1024
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)
_ZSTD_CONTENT_SIZE_SIZES = (0, 2, 4, 8)
_LZ4_MAGIC = b"\x04\x22\x4d\x18"


class CorruptCompressedData(CorruptRecordBatch):
    """The compressed records section does not decompress."""


class DecompressedSizeExceeded(InvalidRecordBatch):
    """Decompressed data would exceed a bound (a compression bomb, or a too large batch)."""

    error_code = ErrorCode.message_too_large  # Kafka's RecordTooLargeException


class DecompressStream(Protocol):
    """The decompressed bytes of one records section, a window at a time."""

    def read(self, n: int) -> Buffer:
        """About ``n`` more bytes (at least one), or an empty buffer at the end."""
        ...


class _Uncompressed:
    """Codec 0: slices of the section itself."""

    __slots__ = ("_mv", "_pos")

    def __init__(self, data: Buffer) -> None:
        self._mv = memoryview(data).cast("B")
        self._pos = 0

    def read(self, n: int) -> Buffer:
        pos = self._pos
        self._pos = min(pos + n, len(self._mv))
        return self._mv[pos : self._pos]


class _Gzip:
    __slots__ = ("_d", "_mv", "_pos")

    def __init__(self, data: Buffer) -> None:
        self._d: zlib._Decompress | None = zlib.decompressobj(31)  # gzip framing only, as Java's
        self._mv = memoryview(data).cast("B")
        self._pos = 0

    def read(self, n: int) -> Buffer:
        mv = self._mv
        if self._pos == 0 and self._d is not None and n >= _GZIP_ONE_SHOT_MIN:
            whole = _gzip_one_shot(mv, n)
            if whole is not None:
                self._d = None
                return whole
        while self._d is not None:
            d = self._d
            piece = mv[self._pos : self._pos + _GZIP_INPUT_SLICE]
            try:
                out = d.decompress(piece, n)
            except zlib.error as e:
                raise CorruptCompressedData(f"gzip data does not decompress: {e}") from None
            self._pos += len(piece) - len(d.unconsumed_tail)
            if d.eof:
                self._pos -= len(d.unused_data)
                if self._pos == len(mv):
                    self._d = None
                elif mv[self._pos : self._pos + 2] == b"\x1f\x8b":
                    self._d = zlib.decompressobj(31)  # the next member
                else:
                    raise CorruptCompressedData("gzip data is followed by bytes that are not gzip")
            elif not out and self._pos == len(mv):
                raise CorruptCompressedData("gzip data ends inside its stream")
            if out:
                return out
        return b""


def _gzip_one_shot(mv: memoryview, n: int) -> memoryview | None:
    """The whole gzip stream when it decodes to at most ``n`` bytes, else None.

    cramjam's gzip decoder is about four times zlib's speed, and a produced batch
    usually fits a first window: it decodes into a bounded buffer (it stops, with
    an error, when the buffer is full), sized from the ISIZE trailer, a hint no
    larger than ``n`` (a lie costs at most ``n`` bytes and one retry)."""
    hint = int.from_bytes(mv[-4:], "little") if len(mv) >= 18 else 0
    size = min(n, max(_GZIP_ONE_SHOT_MIN // 16, hint + 1, 4 * len(mv)))
    while True:
        out = bytearray(size)
        try:
            written = cramjam.gzip.decompress_into(mv, out)
        except (cramjam.DecompressionError, OSError, ValueError) as e:
            if "write whole buffer" not in str(e):
                raise CorruptCompressedData(f"gzip data does not decompress: {e}") from None
            if size >= n:
                return None  # larger than a window: streamed instead
            size = min(n, 4 * size)
            continue
        return memoryview(out)[:written]


class _Zstd:
    """Blocks are fed to the decoder a few at a time: a call emits at most what they can."""

    __slots__ = ("_mv", "_pos", "_fed", "_dctx", "_dobj", "_checksum")

    def __init__(self, data: Buffer) -> None:
        self._mv = memoryview(data).cast("B")
        self._pos = 0  # next byte to walk
        self._fed = 0  # next byte to give the decoder
        self._dctx: zstandard.ZstdDecompressor | None = None
        self._dobj: zstandard.ZstdDecompressionObj | None = None
        self._checksum = False

    def read(self, n: int) -> Buffer:
        while True:
            if self._dobj is None and not self._frame_start():
                return b""
            out = self._feed(self._walk_blocks(n))
            if out:
                return out

    def _walk_blocks(self, budget: int) -> bool:
        """Step over blocks until they may decode to ``budget`` bytes or the frame ends
        (True). A block decodes to at most 128 KiB; raw and RLE blocks to their size."""
        mv = self._mv
        end = len(mv)
        pos = self._pos
        while budget > 0:
            if pos + 3 > end:
                raise CorruptCompressedData("zstd data ends inside a block header")
            header = mv[pos] | (mv[pos + 1] << 8) | (mv[pos + 2] << 16)
            kind = (header >> 1) & 3
            size = header >> 3
            if kind == 3 or size > _ZSTD_BLOCK_MAX:
                raise CorruptCompressedData("zstd data has an invalid block header")
            pos += 3 + (1 if kind == 1 else size)  # RLE: one byte repeated `size` times
            budget -= _ZSTD_BLOCK_MAX if kind == 2 else size
            if header & 1:  # the frame's last block, then its checksum
                self._pos = pos + (4 if self._checksum else 0)
                if self._pos > end:
                    raise CorruptCompressedData("zstd data ends inside a frame")
                return True
        if pos > end:
            raise CorruptCompressedData("zstd data ends inside a block")
        self._pos = pos
        return False

    def _frame_start(self) -> bool:
        """Open the frame at ``_pos`` (skipping skippable frames); False at the end."""
        mv = self._mv
        end = len(mv)
        while self._pos < end:
            pos = self._pos
            if pos + 5 > end:
                raise CorruptCompressedData("zstd data ends inside a frame header")
            magic = mv[pos] | (mv[pos + 1] << 8) | (mv[pos + 2] << 16) | (mv[pos + 3] << 24)
            if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE:
                if pos + 8 > end:
                    raise CorruptCompressedData("zstd data ends inside a skippable frame")
                size = mv[pos + 4] | (mv[pos + 5] << 8) | (mv[pos + 6] << 16) | (mv[pos + 7] << 24)
                self._pos = self._fed = pos + 8 + size
                if self._pos > end:
                    raise CorruptCompressedData("zstd skippable frame overruns the data")
                continue
            if magic != _ZSTD_MAGIC:
                raise CorruptCompressedData("zstd data has an unknown frame magic")
            fhd = mv[pos + 4]
            single_segment = (fhd >> 5) & 1
            content_size = _ZSTD_CONTENT_SIZE_SIZES[fhd >> 6] or single_segment
            self._pos = pos + 5 + (1 - single_segment) + _ZSTD_DICT_ID_SIZES[fhd & 3] + content_size
            self._fed = pos
            self._checksum = bool(fhd & 4)
            self._dctx = _zstd_context()
            self._dobj = self._dctx.decompressobj()
            return True
        return False

    def _feed(self, frame_end: bool) -> bytes:
        dobj = self._dobj
        assert dobj is not None
        try:
            out = dobj.decompress(self._mv[self._fed : self._pos])
        except zstandard.ZstdError as e:
            raise CorruptCompressedData(f"zstd data does not decompress: {e}") from None
        self._fed = self._pos
        if frame_end:
            if not dobj.eof:
                raise CorruptCompressedData("zstd frame does not end where its blocks do")
            self._dobj = None
            if self._dctx is not None and len(_ZSTD_CONTEXTS) < _ZSTD_CONTEXTS_KEPT:
                _ZSTD_CONTEXTS.append(self._dctx)
            self._dctx = None
        return out


_ZSTD_CONTEXTS: list[zstandard.ZstdDecompressor] = []
_ZSTD_CONTEXTS_KEPT = 4


def _zstd_context() -> zstandard.ZstdDecompressor:
    """A decoder context of its own for one frame (creating one costs ~20 us, so they
    are kept; two streams never share one, as concurrent requests' streams interleave).
    A stream that fails mid-frame drops its context."""
    try:
        return _ZSTD_CONTEXTS.pop()
    except IndexError:
        return zstandard.ZstdDecompressor(max_window_size=MAX_ZSTD_WINDOW)


class _Lz4:
    __slots__ = ("_d", "_rest")

    def __init__(self, data: Buffer) -> None:
        self._d: lz4.frame.LZ4FrameDecompressor | None = None
        self._rest: Buffer = memoryview(data).cast("B")  # input not yet given to a decoder

    def read(self, n: int) -> Buffer:
        while True:
            d = self._d
            if d is None:
                rest = self._rest
                if not rest:
                    return b""
                if len(rest) < 7 or bytes(rest[:4]) != _LZ4_MAGIC:
                    raise CorruptCompressedData("lz4 data is not an lz4 frame")
                d = self._d = lz4.frame.LZ4FrameDecompressor()
                self._rest = b""
                feed: Buffer = rest
            else:
                feed = b""
            try:
                out = d.decompress(feed, n)
            except RuntimeError as e:
                raise CorruptCompressedData(f"lz4 data does not decompress: {e}") from None
            if d.eof:
                self._rest = d.unused_data or b""  # a concatenated frame, if any
                self._d = None
            elif not out and d.needs_input:
                raise CorruptCompressedData("lz4 data ends inside its frame")
            if out:
                return out


class _Snappy:
    """xerial-framed or raw snappy, one block decoded at a time."""

    __slots__ = ("_mv", "_pos", "_xerial", "_block", "_at")

    def __init__(self, data: Buffer) -> None:
        self._mv = memoryview(data).cast("B")
        self._xerial = len(self._mv) >= XERIAL_HEADER_SIZE and self._mv[:8] == XERIAL_MAGIC
        # version and compat are not checked: some producers write them little-endian
        self._pos = XERIAL_HEADER_SIZE if self._xerial else 0
        self._block: Buffer = b""
        self._at = 0

    def read(self, n: int) -> Buffer:
        while self._at >= len(self._block):
            block = self._next_block()
            if block is None:
                return b""
            self._block, self._at = _snappy_block(block), 0
        at = self._at
        self._at = at + n
        return memoryview(self._block)[at : at + n]

    def _next_block(self) -> memoryview | None:
        mv = self._mv
        end = len(mv)
        if not self._xerial:
            if self._pos == 0:
                self._pos = end
                return mv
            return None
        while self._pos < end:
            pos = self._pos
            if mv[pos] == 0x82 and mv[pos : pos + 8] == XERIAL_MAGIC:
                self._pos = pos + XERIAL_HEADER_SIZE  # a concatenated stream (lengths are >= 0)
                continue
            if pos + 4 > end:
                raise CorruptCompressedData("truncated xerial snappy block length")
            length = structs.I32.unpack_from(mv, pos)[0]
            if length < 0 or pos + 4 + length > end:
                raise CorruptCompressedData("xerial snappy block overruns the data")
            self._pos = pos + 4 + length
            return mv[pos + 4 : self._pos]
        return None


def _snappy_block(block: memoryview) -> bytearray:
    """One raw snappy block, decoded whole once its claimed size is believable."""
    try:
        claimed = cramjam.snappy.decompress_raw_len(block)
    except (cramjam.DecompressionError, OSError, ValueError) as e:
        raise CorruptCompressedData(f"snappy data does not decompress: {e}") from None
    if claimed > MAX_SNAPPY_BLOCK:
        raise DecompressedSizeExceeded(
            f"snappy block claims {claimed} bytes, over the {MAX_SNAPPY_BLOCK} limit"
        )
    if claimed > SNAPPY_MAX_RATIO * len(block):
        raise CorruptCompressedData(
            f"snappy block of {len(block)} bytes claims {claimed} bytes, more than it can hold"
        )
    out = bytearray(claimed)
    try:
        written = cramjam.snappy.decompress_raw_into(block, out)
    except (cramjam.DecompressionError, OSError, ValueError) as e:
        raise CorruptCompressedData(f"snappy data does not decompress: {e}") from None
    if written != claimed:
        raise CorruptCompressedData("snappy data is shorter than its declared length")
    return out


_STREAMS: dict[int, Callable[[Buffer], DecompressStream]] = {
    0: _Uncompressed,
    GZIP: _Gzip,
    SNAPPY: _Snappy,
    LZ4: _Lz4,
    ZSTD: _Zstd,
}


def open_stream(codec: int, data: Buffer) -> DecompressStream:
    """A stream of ``data`` decompressed with ``codec`` (0-4; the caller checks the id)."""
    return _STREAMS[codec](data)


def read_all(stream: DecompressStream, max_output: int) -> bytes:
    """The rest of ``stream`` as one buffer; DecompressedSizeExceeded past ``max_output``."""
    parts: list[Buffer] = []
    total = 0
    while True:
        piece = stream.read(min(CHUNK, max_output + 1 - total) or 1)
        if not piece:
            return b"".join(parts)
        total += len(piece)
        if total > max_output:
            raise DecompressedSizeExceeded(f"data decompresses to more than {max_output} bytes")
        parts.append(piece)
