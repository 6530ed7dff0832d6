"""The record validator parses every record of a produced batch (Kafka's
LogValidator): malformed records are rejected whatever the codec and wherever
the stream's windows fall; whatever it accepts, a stock client's decoder reads."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from kafkalite.protocol import record_batch as rb
from kafkalite.protocol import record_validator as rv
from kafkalite.protocol.record_batch import InvalidRecord
from kafkalite.protocol.record_validator import (
    InvalidTimestamp,
    RecordErrors,
    TopicLimits,
    validate_produce_records,
)
from kafkalite.protocol.records import build_batch, decode_batch
from tests.protocol.forged_records import MALFORMED, batch, record, svarint

CODECS = [0, 1, 2, 3, 4]
HOUR = 3_600_000
LIMITS = TopicLimits(1 << 30, False, 2**63 - 1, HOUR)


def check(buf: bytes, limits: TopicLimits = LIMITS) -> rv.CheckedBatch:
    return validate_produce_records(buf, 9, limits, int(time.time() * 1000))


@pytest.fixture(params=["one window", "tiny windows"])
def windows(request, monkeypatch):
    """The whole section in the first window, or a few bytes at a time with every
    record over 8 bytes read through the big-record cursor."""
    if request.param == "tiny windows":
        monkeypatch.setattr(rv, "FIRST_WINDOW", 3)
        monkeypatch.setattr(rv, "CHUNK", 5)
        monkeypatch.setattr(rv, "BIG_RECORD", 8)
    return request.param


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_record_is_invalid_record(case, codec, windows):
    with pytest.raises(InvalidRecord) as e:
        check(batch(MALFORMED[case], codec=codec))
    assert e.value.error_code == 87


def test_declared_count_must_match_the_records(windows):
    with pytest.raises(InvalidRecord, match="premature EOF"):
        check(batch([record(0)], count=2))
    with pytest.raises(InvalidRecord, match="still remaining"):
        check(batch([record(0), record(1)], count=1))


def test_non_minimal_varints_within_their_size_are_accepted_as_kafka_does(windows):
    two_byte_null_key = record(key_field=b"\x81\x00")
    checked = check(batch([two_byte_null_key]))
    assert decode_batch(checked.records)[1][0].key is None


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=20)),
            st.one_of(st.none(), st.binary(max_size=200)),
            st.lists(
                st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=10))),
                max_size=3,
            ),
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from(CODECS),
)
def test_valid_batches_pass_and_are_stored_as_produced(windows, records, codec):
    produced = build_batch(records, compression=codec)
    checked = check(produced)
    assert bytes(checked.records) == produced
    assert checked.header.records_count == len(records)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_whatever_is_accepted_decodes_in_kafka_python(windows, data):
    """Change bytes of a valid records section (then compress it, and sign the CRC):
    the validator either rejects the batch or kafka-python reads every record of it."""
    records = [(b"k%d" % i, b"v" * i, [("h", b"x")] if i % 2 else []) for i in range(6)]
    section = bytearray(build_batch(records)[rb.RECORDS_OFFSET :])
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(section) - 1))
        section[at] = data.draw(st.integers(0, 255))
    codec = data.draw(st.sampled_from(CODECS))
    try:
        checked = check(batch([bytes(section)], codec=codec, count=len(records)))
    except InvalidRecord:
        return
    decoded = list(DefaultRecordBatch(bytes(checked.records)))
    assert len(decoded) == len(records)
    assert [r.offset for r in decoded] == list(range(len(records)))


def test_compacted_topic_lists_every_record_without_a_key_as_kafka(windows):
    limits = TopicLimits(1 << 30, False, 2**63 - 1, HOUR, compact=True, topic_partition="c-0")
    buf = batch([record(0, key=b"a"), record(1), record(2, key=b"b"), record(3)])
    with pytest.raises(RecordErrors) as e:
        check(buf, limits)
    message = "Compacted topic cannot accept message without key in topic partition c-0."
    assert e.value.error_code == 87
    assert e.value.record_errors == [(1, message), (3, message)]
    assert str(e.value) == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{message}'), "
        f"RecordError(batchIndex=3, message='{message}')]"
    )


def test_a_record_without_a_key_reports_its_key_not_its_timestamp(windows):
    """Kafka's validateRecord checks the key first: one error per record."""
    limits = TopicLimits(1 << 30, False, HOUR, HOUR, compact=True, topic_partition="c-0")
    old = svarint(-2 * HOUR)
    buf = batch([record(0, timestamp_delta=old), record(1, key=b"k", timestamp_delta=old)])
    with pytest.raises(InvalidTimestamp) as e:
        check(buf, limits)
    assert [(i, m.split()[0]) for i, m in e.value.record_errors] == [
        (0, "Compacted"),
        (1, "Timestamp"),
    ]


def test_max_timestamp_is_set_from_the_records_as_kafka_does(windows):
    now = int(time.time() * 1000)
    produced = build_batch(
        [(b"a", b"1", [], now - 10), (b"b", b"2", [], now)], max_timestamp=now - 500
    )
    checked = check(produced)
    assert checked.header.max_timestamp == now
    header, records = decode_batch(checked.records)  # and the CRC was signed again
    assert header.max_timestamp == now and [r.timestamp for r in records] == [now - 10, now]


def test_record_errors_are_capped_but_counted():
    many = [record(i) for i in range(rv.MAX_RECORD_ERRORS + 5)]
    limits = TopicLimits(1 << 30, False, 2**63 - 1, HOUR, compact=True, topic_partition="c-0")
    with pytest.raises(RecordErrors) as e:
        check(batch(many), limits)
    assert len(e.value.record_errors) == rv.MAX_RECORD_ERRORS
    assert f"due to {rv.MAX_RECORD_ERRORS + 5} record errors" in str(e.value)
