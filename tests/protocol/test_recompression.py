"""Recompression to a topic's compression.type keeps every record, header field and
the batch's identity; only the codec bits, the length and the CRC change."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol import record_batch as rb
from kafkalite.protocol.compression import CompressionType
from kafkalite.protocol.recompression import needs_recompression, recompress_batches
from kafkalite.protocol.records import build_batch, decode_batch

CODECS = list(CompressionType)

records_st = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=8)), max_size=3),
    ),
    min_size=1,
    max_size=30,
)


def _batch(records, codec: int, **kw) -> bytes:
    return build_batch(
        [
            (k, v, [(hk, hv) for hk, hv in hs], 1_700_000_000_000 + i)
            for i, (k, v, hs) in enumerate(records)
        ],
        compression=codec,
        **kw,
    )


@settings(max_examples=60, deadline=None)
@given(records_st, st.sampled_from(CODECS), st.sampled_from(CODECS), st.booleans())
def test_recompressed_batch_decodes_to_the_same_records(records, source, target, idem):
    kw = {"producer_id": 7, "producer_epoch": 2, "base_sequence": 40} if idem else {}
    original = _batch(records, source, timestamp_type=1 if idem else 0, **kw)
    converted = recompress_batches(original, CompressionType(target))
    assert needs_recompression(original, CompressionType(target)) == (source != target)
    assert not needs_recompression(converted, CompressionType(target))
    h0, r0 = decode_batch(original)
    h1, r1 = decode_batch(converted)  # checks the new CRC
    assert h1.compression == target
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in r1] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in r0
    ]
    same = (
        "base_offset",
        "last_offset_delta",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
        "max_timestamp",
        "base_timestamp",
        "partition_leader_epoch",
    )
    assert {f: getattr(h1, f) for f in same} == {f: getattr(h0, f) for f in same}
    assert h1.attributes & ~rb.COMPRESSION_CODEC_MASK == h0.attributes & ~rb.COMPRESSION_CODEC_MASK
    if source == target:
        assert converted == original


def test_several_batches_each_converted_and_keep_to_their_own_bytes():
    a = _batch([(b"k", b"v" * 100, [])], CompressionType.NONE)
    b = _batch([(b"k2", b"w" * 100, [])], CompressionType.LZ4, base_offset=1)
    out = recompress_batches(a + b, CompressionType.GZIP)
    positions = list(rb.iter_batch_positions(out))
    assert len(positions) == 2
    values = [decode_batch(out, pos)[1][0].value for pos, _ in positions]
    assert values == [b"v" * 100, b"w" * 100]
    assert all(
        decode_batch(out, pos)[0].compression == CompressionType.GZIP for pos, _ in positions
    )


def test_no_target_means_the_producers_codec_is_kept():
    assert not needs_recompression(_batch([(b"k", b"v", [])], CompressionType.SNAPPY), None)
