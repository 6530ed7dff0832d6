"""What Kafka rejects in a produced records field, on the wire: one batch per
partition (v3+), magic 2, zstd only from v7, baseOffset 0, consistent counts
(compressed batches too), no control batches, per-record timestamps."""

from __future__ import annotations

import datetime
import struct
import time

import pytest
from kio.schema.produce.v5 import request as produce_v5

from kafkalite.protocol import record_batch as rb
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.record_batch import iter_headers
from kafkalite.protocol.records import build_batch
from tests.server.raw_client import RawClient
from tests.server.test_protocol_edges import produce

GZIP, ZSTD = 1, 4


def resign(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, rb.CRC_OFFSET, rb.compute_crc(buf, 0, len(buf)))
    return bytes(buf)


def patched(batch: bytes, *, count: int | None = None, delta: int | None = None, attrs_or=0):
    buf = bytearray(batch)
    if count is not None:
        struct.pack_into(">i", buf, rb.RECORDS_COUNT_OFFSET, count)
    if delta is not None:
        struct.pack_into(">i", buf, rb.LAST_OFFSET_DELTA_OFFSET, delta)
    if attrs_or:
        a = struct.unpack_from(">h", buf, rb.ATTRIBUTES_OFFSET)[0]
        struct.pack_into(">h", buf, rb.ATTRIBUTES_OFFSET, a | attrs_or)
    return resign(buf)


def recs(n: int):
    return [(f"k{i}".encode(), f"value-{i}".encode() * 5) for i in range(n)]


@pytest.fixture
def broker(kafka_broker_factory):
    b = kafka_broker_factory()
    b.create_topic("v")
    return b


@pytest.fixture
def client(broker):
    c = RawClient.to(broker.bootstrap_servers)
    yield c
    c.close()


def send(client, records: bytes, topic="v", version=9):
    if version == 9:
        return client.call(0, 9, produce(topic, records)).responses[0].partition_responses[0]
    req = produce_v5.ProduceRequest(
        acks=1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            produce_v5.TopicProduceData(
                name=topic,
                partition_data=(produce_v5.PartitionProduceData(index=0, records=records),),
            ),
        ),
    )
    return client.call(0, version, req).responses[0].partition_responses[0]


def assert_rejected(broker, r, code, words):
    message = getattr(r, "error_message", None)  # Produce v8+
    assert r.error_code == code, message
    if hasattr(r, "error_message"):
        assert words in (message or "")
    assert r.base_offset == -1
    assert broker.records("v") == []


def test_two_batches_in_one_partition_are_invalid_record(broker, client):
    r = send(client, build_batch(recs(2)) + build_batch(recs(3)))
    assert_rejected(broker, r, ErrorCode.invalid_record, "exactly one record batch")


def test_no_complete_batch_is_invalid_record(broker, client):
    r = send(client, b"")
    assert_rejected(broker, r, ErrorCode.invalid_record, "at least one record batch")
    r = send(client, b"\x00" * 10)
    assert_rejected(broker, r, ErrorCode.invalid_record, "at least one record batch")
    whole = build_batch(recs(2))
    r = send(client, whole[:-5])  # the only batch is cut short
    assert_rejected(broker, r, ErrorCode.invalid_record, "at least one record batch")


def test_a_size_below_the_minimum_overhead_is_corrupt_message(broker, client):
    r = send(client, b"\x00" * 20)  # batchLength 0
    assert_rejected(broker, r, ErrorCode.corrupt_message, "minimum record overhead")


def test_a_trailing_partial_batch_is_dropped_as_kafka_does(broker, client):
    first = build_batch(recs(2))
    second = build_batch(recs(3))
    r = send(client, first + second[:30])
    assert r.error_code == ErrorCode.none and r.base_offset == 0
    assert [x.key for x in broker.records("v")] == [b"k0", b"k1"]


def test_zstd_needs_produce_v7(broker, client):
    z = build_batch(recs(3), compression=ZSTD)
    r = send(client, z, version=5)
    assert_rejected(broker, r, ErrorCode.unsupported_compression_type, "ZStandard")
    assert send(client, build_batch(recs(3), compression=GZIP), version=5).error_code == 0
    assert send(client, z, version=9).error_code == 0


def test_a_zstd_topic_accepts_produce_below_v7_of_other_codecs(broker, client):
    """Only a zstd *batch* needs v7: Kafka 4 recompresses an old producer's batch."""
    broker.create_topic("z", config={"compression.type": "zstd"})
    assert send(client, build_batch(recs(3)), topic="z", version=5).error_code == 0
    assert [x.key for x in broker.records("z")] == [b"k0", b"k1", b"k2"]
    lg = broker.kafka.log_manager.get_log("z", 0)
    data = lg.read(0, 1 << 20, max_offset=None).records
    raw = data if isinstance(data, bytes | bytearray) else data.read_bytes()
    assert {h.compression for _, h in iter_headers(raw)} == {ZSTD}


def test_base_offset_must_be_zero(broker, client):
    r = send(client, build_batch(recs(2), base_offset=5))
    assert_rejected(broker, r, ErrorCode.invalid_record, "should be 0")


@pytest.mark.parametrize("compression", [0, GZIP, ZSTD])
@pytest.mark.parametrize(
    ("count", "delta", "words"),
    [
        (4, 3, "premature EOF"),  # claims more records than it holds
        (2, 1, "still remaining"),  # claims fewer
        (0, 0, "Invalid reported count"),
        (3, 5, "Inconsistent batch offset range"),
    ],
)
def test_record_counts_must_match_the_records(broker, client, compression, count, delta, words):
    batch = patched(build_batch(recs(3), compression=compression), count=count, delta=delta)
    r = send(client, batch)
    assert r.error_code == ErrorCode.invalid_record, r.error_message
    if compression or count == 0 or delta != count - 1:
        # uncompressed dense-delta mismatches may be caught by the header check first
        assert words in r.error_message or "lastOffsetDelta" in r.error_message
    assert broker.records("v") == []


def test_client_control_batches_are_invalid_record(broker, client):
    r = send(client, patched(build_batch(recs(1)), attrs_or=rb.CONTROL_FLAG_MASK))
    assert_rejected(broker, r, ErrorCode.invalid_record, "control records")


def test_undecompressable_payload_is_corrupt_message(broker, client):
    good = bytearray(build_batch(recs(5), compression=GZIP))
    good[rb.RECORDS_OFFSET + 12 : rb.RECORDS_OFFSET + 30] = b"\xaa" * 18
    r = send(client, resign(good))
    assert r.error_code == ErrorCode.corrupt_message, r.error_message
    assert broker.records("v") == []


@pytest.mark.parametrize("compression", [0, GZIP])
def test_every_record_timestamp_is_checked_not_just_the_header(broker, client, compression):
    broker.create_topic("recent", config={"message.timestamp.before.max.ms": "3600000"})
    now = int(time.time() * 1000)
    old = now - 2 * 3_600_000
    records = [(b"a", b"1", [], now), (b"b", b"2", [], old), (b"c", b"3", [], now)]
    # first and max timestamps in the header are fine; the middle record is not
    batch = build_batch(records, compression=compression)
    h = rb.parse_header(batch)
    assert (h.base_timestamp, h.max_timestamp) == (now, now)
    r = send(client, batch, topic="recent")
    assert r.error_code == ErrorCode.invalid_timestamp
    assert r.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [(e.batch_index, str(old) in e.batch_index_error_message) for e in r.record_errors] == [
        (1, True)
    ]
    assert broker.records("recent") == []
    # a future record hidden behind a lying max timestamp (after.max.ms is 1 hour)
    future = now + 2 * 3_600_000
    lying = build_batch(
        [(b"a", b"1", [], now), (b"b", b"2", [], future)],
        compression=compression,
        max_timestamp=now,
    )
    r = send(client, lying)
    assert r.error_code == ErrorCode.invalid_timestamp
    assert [e.batch_index for e in r.record_errors] == [1]
    # in range: accepted
    ok = build_batch([(b"a", b"1", [], now - 1000), (b"b", b"2", [], now)], compression=compression)
    assert send(client, ok, topic="recent").error_code == ErrorCode.none


def test_log_append_time_topics_do_not_check_producer_timestamps(broker, client):
    broker.create_topic("lat", config={"message.timestamp.type": "LogAppendTime"})
    ancient = build_batch([(b"a", b"1", [], 1_000)])
    assert send(client, ancient, topic="lat").error_code == ErrorCode.none
    # but a producer may not claim LogAppendTime itself
    claimed = patched(build_batch([(b"a", b"1")]), attrs_or=rb.TIMESTAMP_TYPE_MASK)
    r = send(client, claimed, topic="lat")
    assert r.error_code == ErrorCode.invalid_timestamp
    assert "LogAppendTime" in r.record_errors[0].batch_index_error_message


def test_a_produced_batch_is_crc_checked_once(broker, client, monkeypatch):
    """The handler's LogValidator checks travel with the records to the log: the
    CRC-32C of a produced batch is computed once, as in Kafka."""
    crcs = []
    real = rb.compute_crc

    def counting(buf, pos, size):
        crcs.append(size)
        return real(buf, pos, size)

    batch = build_batch(recs(3))
    monkeypatch.setattr(rb, "compute_crc", counting)
    r = send(client, batch)
    monkeypatch.undo()
    assert r.error_code == ErrorCode.none
    assert crcs == [len(batch)]
    assert [r.value for r in broker.records("v")] == [v for _, v in recs(3)]
