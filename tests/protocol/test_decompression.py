"""Decompression streams: any read size gives the same bytes, no read returns much
more than asked whatever the data claims, and truncated or trailing data is
corrupt (as cramjam's whole-buffer decoders had it)."""

from __future__ import annotations

import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard

from kafkalite.protocol.compression import XERIAL_HEADER, compress
from kafkalite.protocol.decompression import (
    CorruptCompressedData,
    DecompressedSizeExceeded,
    open_stream,
    read_all,
)

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CODECS = {"gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
DATA = b"".join(b"record %d {'a': %d}\n" % (i, i) for i in range(20_000)) + os.urandom(50_000)


def reads(codec: int, packed: bytes, n: int) -> list[int]:
    stream = open_stream(codec, packed)
    sizes = []
    while piece := stream.read(n):
        sizes.append(len(piece))
    return sizes


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS)
@pytest.mark.parametrize("n", [1, 1000, 1 << 20])
def test_every_read_size_gives_the_same_bytes(codec, n):
    packed = compress(codec, DATA)
    stream = open_stream(codec, packed)
    parts = []
    while piece := stream.read(n):
        parts.append(bytes(piece))
    assert b"".join(parts) == DATA


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS)
def test_a_read_returns_about_what_was_asked_of_a_bomb(codec):
    """1 GiB of zeros read 64 KiB at a time: no read returns more than one zstd
    block (128 KiB) or snappy/lz4/gzip piece beyond the ask."""
    zeros = bytes(64 << 20)
    packed = compress(codec, zeros, level=1 if codec != SNAPPY else None)
    sizes = reads(codec, packed, 64 * 1024)
    assert sum(sizes) == len(zeros)
    assert max(sizes) <= 128 * 1024


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS)
def test_truncated_data_is_corrupt(codec):
    packed = compress(codec, DATA)
    for cut in (len(packed) - 1, len(packed) // 2, 20):
        with pytest.raises(CorruptCompressedData):
            read_all(open_stream(codec, packed[:cut]), 1 << 30)


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD], ids=["gzip", "lz4", "zstd"])
def test_trailing_bytes_are_corrupt_but_concatenated_streams_are_read(codec):
    packed = compress(codec, DATA)
    with pytest.raises(CorruptCompressedData):
        read_all(open_stream(codec, packed + b"junk"), 1 << 30)
    assert read_all(open_stream(codec, packed + packed), 1 << 30) == DATA + DATA


def test_zstd_skippable_frames_are_skipped():
    skippable = struct.pack("<II", 0x184D2A53, 5) + b"12345"
    packed = skippable + compress(ZSTD, DATA) + skippable
    assert read_all(open_stream(ZSTD, packed), 1 << 30) == DATA


def test_zstd_frame_asking_for_a_window_over_128_mib_is_corrupt():
    # window descriptor: exponent 18 -> windowLog 28 (256 MiB), then one empty raw last block
    frame = b"\x28\xb5\x2f\xfd" + b"\x00" + bytes((18 << 3,)) + b"\x01\x00\x00"
    with pytest.raises(CorruptCompressedData, match="zstd data does not decompress"):
        read_all(open_stream(ZSTD, frame), 1 << 30)
    ok = zstandard.ZstdCompressor(level=1).compress(b"x" * 1000)
    assert read_all(open_stream(ZSTD, ok), 1 << 30) == b"x" * 1000


def _zstd_header_length(frame: bytes) -> int:
    fhd = frame[4]
    single_segment = (fhd >> 5) & 1
    content_size = (single_segment, 2, 4, 8)[fhd >> 6]
    return 5 + (1 - single_segment) + (0, 1, 2, 4)[fhd & 3] + content_size


def test_zstd_block_headers_that_lie_are_corrupt():
    packed = bytearray(compress(ZSTD, DATA))
    at = _zstd_header_length(packed)
    packed[at : at + 3] = ((1 << 20) << 3 | 4).to_bytes(3, "little")  # a block over 128 KiB
    with pytest.raises(CorruptCompressedData, match="invalid block header"):
        read_all(open_stream(ZSTD, bytes(packed)), 1 << 30)


def test_lz4_checksums_are_verified():
    packed = bytearray(lz4.frame.compress(DATA, content_checksum=True, block_checksum=True))
    packed[-10] ^= 0xFF
    with pytest.raises(CorruptCompressedData):
        read_all(open_stream(LZ4, bytes(packed)), 1 << 30)


def test_snappy_block_claiming_more_than_its_bytes_can_hold_is_corrupt():
    raw = cramjam.snappy.compress_raw(b"abc" * 100)
    claims_a_mib = b"\x80\x80\x40" + bytes(raw)[2:]  # preamble 1 MiB on a 300-byte block
    with pytest.raises(CorruptCompressedData, match="more than it can hold"):
        read_all(open_stream(SNAPPY, claims_a_mib), 1 << 30)
    xerial = XERIAL_HEADER + struct.pack(">i", len(claims_a_mib)) + claims_a_mib
    with pytest.raises(CorruptCompressedData, match="more than it can hold"):
        read_all(open_stream(SNAPPY, xerial), 1 << 30)


def test_read_all_stops_past_max_output():
    packed = compress(ZSTD, bytes(10 << 20))
    with pytest.raises(DecompressedSizeExceeded):
        read_all(open_stream(ZSTD, packed), 1 << 20)
    assert len(read_all(open_stream(ZSTD, packed), 10 << 20)) == 10 << 20


def test_interleaved_zstd_streams_do_not_share_a_decoder():
    """Two requests' checks run in slices on one loop: their streams alternate."""
    a, b = compress(ZSTD, DATA), compress(ZSTD, DATA[::-1])
    sa, sb = open_stream(ZSTD, a), open_stream(ZSTD, b)
    out_a, out_b = [], []
    while True:
        pa, pb = sa.read(4096), sb.read(4096)
        if not pa and not pb:
            break
        out_a.append(bytes(pa))
        out_b.append(bytes(pb))
    assert b"".join(out_a) == DATA and b"".join(out_b) == DATA[::-1]
