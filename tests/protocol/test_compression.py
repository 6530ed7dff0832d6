"""Compression codecs: round trips, interop with stock clients' codecs, bomb bounds."""

from __future__ import annotations

import gzip
import os
import struct
import time
import tracemalloc

import aiokafka.codec
import cramjam
import kafka.codec
import pytest

from kafkalite.protocol.compression import (
    COMPRESSION_TYPE_NAMES,
    XERIAL_HEADER,
    CompressionType,
    CorruptCompressedData,
    DecompressedSizeExceeded,
    compress,
    decompress,
    parse_compression_type,
    resolve_compression,
    snappy_decompress,
    snappy_xerial_compress,
)
from kafkalite.protocol.record_batch import CorruptRecordBatch, UnsupportedCompression

CODECS = list(CompressionType)
COMPRESSED = [c for c in CompressionType if c]
PAYLOADS = {
    "empty": b"",
    "tiny": b"x",
    "text": b"".join(b'record %d: some repetitive json {"a": %d}\n' % (i, i) for i in range(5000)),
    "random": os.urandom(100_000),
    "zeros-1MiB": bytes(1 << 20),
}


class _RawSnappy:
    """python-snappy's block API; kafka-python does the xerial framing itself."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.kafka_name)
@pytest.mark.parametrize("name", PAYLOADS)
def test_every_codec_round_trips(codec: CompressionType, name: str) -> None:
    data = PAYLOADS[name]
    packed = compress(codec, data)
    assert isinstance(packed, bytes)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(bytearray(packed))) == data
    assert compress(codec, bytearray(data)) == packed or codec == CompressionType.GZIP
    assert decompress(codec, compress(codec, memoryview(data))) == data


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.kafka_name)
def test_compression_levels_are_honoured(codec: CompressionType) -> None:
    data = PAYLOADS["text"]
    levels = {
        CompressionType.GZIP: (1, 9),
        CompressionType.LZ4: (1, 12),
        CompressionType.ZSTD: (1, 19),
    }
    for level in levels.get(codec, (None,)):
        assert decompress(codec, compress(codec, data, level=level)) == data


# --- snappy: xerial and raw --------------------------------------------------------


def test_snappy_writes_xerial_framing_in_32k_blocks_like_the_java_producer() -> None:
    data = PAYLOADS["random"]
    packed = compress(CompressionType.SNAPPY, data)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, sizes = 16, []
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        sizes.append(len(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert sizes == [32768, 32768, 32768, 100_000 - 3 * 32768]


def test_stock_clients_decode_our_snappy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka.codec, "snappy", _RawSnappy)
    for name in ("text", "random", "tiny"):
        packed = compress(CompressionType.SNAPPY, PAYLOADS[name])
        assert kafka.codec.snappy_decode(packed) == PAYLOADS[name]
        assert aiokafka.codec.snappy_decode(packed) == PAYLOADS[name]


def test_snappy_decodes_xerial_from_stock_clients_and_raw_from_librdkafka(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kafka.codec, "snappy", _RawSnappy)
    data = PAYLOADS["text"]
    assert decompress(2, kafka.codec.snappy_encode(data, xerial_blocksize=1000)) == data
    assert decompress(2, aiokafka.codec.snappy_encode(data)) == data
    assert decompress(2, aiokafka.codec.snappy_encode(data, xerial_compatible=False)) == data
    assert decompress(2, cramjam.snappy.compress_raw(b"")) == b""


def test_snappy_xerial_tolerates_odd_headers_and_concatenated_streams() -> None:
    data = PAYLOADS["text"]
    packed = snappy_xerial_compress(data, block_size=5000)
    little_endian_versions = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + packed[16:]
    assert snappy_decompress(little_endian_versions) == data
    assert snappy_decompress(packed + snappy_xerial_compress(b"tail")) == data + b"tail"
    assert snappy_decompress(XERIAL_HEADER) == b""


@pytest.mark.parametrize(
    "bad",
    [
        XERIAL_HEADER + b"\x00\x00",  # truncated block length
        XERIAL_HEADER + struct.pack(">i", 100) + b"abc",  # block overruns
        XERIAL_HEADER + struct.pack(">i", -5) + b"abc",  # negative block length
        XERIAL_HEADER + struct.pack(">i", 3) + b"\xff\xff\xff",  # garbage block
        b"\x0a\x00abc",  # raw: literal shorter than the declared length
        b"\xff\xff\xff",  # raw: unterminated preamble
    ],
)
def test_corrupt_snappy_is_corrupt(bad: bytes) -> None:
    with pytest.raises(CorruptCompressedData):
        decompress(CompressionType.SNAPPY, bad)


# --- lz4: the frame format with independent blocks ----------------------------------


def test_lz4_writes_frames_with_independent_blocks() -> None:
    packed = compress(CompressionType.LZ4, PAYLOADS["random"])
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg, bd = packed[4], packed[5]
    assert flg >> 6 == 1  # frame version 01
    assert flg & 0x20  # block independence: Kafka's Java reader requires it
    assert not flg & 0x04  # no content checksum
    assert bd == 0x40  # 64 KiB max block size, as Kafka's Java writer uses
    assert aiokafka.codec.lz4_decode(packed) == PAYLOADS["random"]


def test_lz4_decodes_frames_written_other_ways() -> None:
    data = PAYLOADS["text"]
    assert decompress(3, aiokafka.codec.lz4_encode(data)) == data
    assert decompress(3, cramjam.lz4.compress(data)) == data  # linked blocks + checksum
    with_size = cramjam.lz4.Compressor(level=1)
    with_size.compress(data)
    assert decompress(3, bytes(with_size.finish())) == data


# --- gzip and zstd ------------------------------------------------------------------


def test_gzip_interoperates_with_stdlib_and_kafka_python() -> None:
    data = PAYLOADS["text"]
    assert gzip.decompress(compress(CompressionType.GZIP, data)) == data
    assert kafka.codec.gzip_decode(compress(CompressionType.GZIP, data)) == data
    assert decompress(1, kafka.codec.gzip_encode(data)) == data
    assert decompress(1, gzip.compress(data[:100]) + gzip.compress(data[100:])) == data


def test_zstd_decodes_streamed_frames_without_a_content_size() -> None:
    data = PAYLOADS["text"] * 4
    streamer = cramjam.zstd.Compressor(level=3)
    streamer.compress(data)
    packed = bytes(streamer.finish())
    assert packed[4] >> 6 == 0  # no frame content size: the hint parser must cope
    assert decompress(CompressionType.ZSTD, packed) == data
    assert aiokafka.codec.zstd_decode(compress(CompressionType.ZSTD, data)) == data
    assert decompress(4, aiokafka.codec.zstd_encode(data)) == data


@pytest.mark.parametrize("codec", [1, 3, 4], ids=["gzip", "lz4", "zstd"])
def test_corrupt_or_truncated_streams_are_corrupt_record_batches(codec: int) -> None:
    packed = compress(codec, PAYLOADS["text"])
    for bad in (packed[: len(packed) // 2], packed[:10] + b"\xff" * 40 + packed[50:], b"nonsense"):
        with pytest.raises(CorruptCompressedData) as exc:
            decompress(codec, bad)
        assert isinstance(exc.value, CorruptRecordBatch) and exc.value.error_code == 2


# --- bombs ------------------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.kafka_name)
def test_decompression_is_bounded_by_max_output(codec: CompressionType) -> None:
    data = bytes(50_000_000)
    packed = compress(codec, data, level=1 if codec != CompressionType.SNAPPY else None)
    started = time.monotonic()
    with pytest.raises(DecompressedSizeExceeded) as exc:
        decompress(codec, packed, max_output=1 << 20)
    assert time.monotonic() - started < 1.0  # stops early instead of inflating 50 MB first
    assert exc.value.error_code == 10
    small = compress(codec, PAYLOADS["text"])
    assert decompress(codec, small, max_output=len(PAYLOADS["text"])) == PAYLOADS["text"]
    with pytest.raises(DecompressedSizeExceeded):
        decompress(codec, small, max_output=len(PAYLOADS["text"]) - 1)


def test_snappy_bomb_is_refused_from_its_declared_length_alone() -> None:
    claims_4gib = b"\xff\xff\xff\xff\x0f" + b"\x00"
    with pytest.raises(DecompressedSizeExceeded):
        decompress(CompressionType.SNAPPY, claims_4gib, max_output=1 << 30)
    block = cramjam.snappy.compress_raw(bytes(60_000))
    many = XERIAL_HEADER + (struct.pack(">i", len(block)) + bytes(block)) * 100
    with pytest.raises(DecompressedSizeExceeded):
        decompress(CompressionType.SNAPPY, many, max_output=1_000_000)
    assert len(decompress(CompressionType.SNAPPY, many, max_output=6_000_000)) == 6_000_000


def test_output_far_beyond_the_size_hint_still_decompresses() -> None:
    # lz4 frames from Kafka's Java writer carry no content size; the buffer has to grow
    data = bytes(30_000_000)
    packed = compress(CompressionType.LZ4, data)
    assert len(packed) * 4 * 16 < len(data)  # the 4x-input first guess grows at least twice
    assert decompress(CompressionType.LZ4, packed) == data


def _claims_a_terabyte(codec: int) -> bytes:
    if codec == CompressionType.GZIP:
        return compress(codec, b"abc" * 1000)[:-4] + b"\xff\xff\xff\xff"  # ISIZE trailer
    size = (1 << 40).to_bytes(8, "little")
    if codec == CompressionType.ZSTD:  # single segment, 8-byte frame content size
        return b"\x28\xb5\x2f\xfd\xe0" + size + b"\x00" * 20
    return b"\x04\x22\x4d\x18\x68\x40" + size + b"\x00" * 20  # lz4 FLG with content size


@pytest.mark.parametrize("codec", [1, 3, 4], ids=["gzip", "lz4", "zstd"])
def test_a_lying_declared_size_does_not_drive_allocation(codec: int) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(CorruptCompressedData):
            decompress(codec, _claims_a_terabyte(codec))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # neither the terabyte claimed nor max_output: at most one read's window (1 MiB)
    assert peak < 2 << 20


# --- names and ids ---------------------------------------------------------------


def test_compression_type_names_follow_kafka_config_values() -> None:
    assert [c.kafka_name for c in CompressionType] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert [int(c) for c in CompressionType] == [0, 1, 2, 3, 4]
    assert set(COMPRESSION_TYPE_NAMES) == {
        "none", "uncompressed", "gzip", "snappy", "lz4", "zstd", "producer",
    }  # fmt: skip
    assert parse_compression_type("uncompressed") is CompressionType.NONE
    assert parse_compression_type("ZSTD") is CompressionType.ZSTD
    assert parse_compression_type("producer") is None
    with pytest.raises(ValueError, match="compression.type"):
        parse_compression_type("brotli")


def test_producer_compression_type_keeps_the_batch_codec() -> None:
    assert resolve_compression("producer", 3) is CompressionType.LZ4
    assert resolve_compression("gzip", 3) is CompressionType.GZIP
    assert resolve_compression("uncompressed", 4) is CompressionType.NONE


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec_ids_are_unsupported(codec: int) -> None:
    with pytest.raises(UnsupportedCompression) as exc:
        decompress(codec, b"abc")
    assert exc.value.error_code == 76
    with pytest.raises(UnsupportedCompression):
        compress(codec, b"abc")
