"""The controller's authenticator on the wire: where it sits in request header v2, what it
binds, and that hostile header tags end in a value or InterBrokerCodecError."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol.headers import parse_request_header

SECRET = bytes(range(32))


def test_a_signed_header_is_a_kafka_request_header_v2_with_one_tagged_field():
    req = ib.ControlledShutdownRequest(1, 7)
    body = ib.encode_request(ib.CONTROLLED_SHUTDOWN, 3, req)
    frame = ib.request_frame(
        ib.CONTROLLED_SHUTDOWN, 3, 42, "c", req, secret=SECRET, target_broker_id=0
    )[4:]
    # a Kafka peer skips the unknown tag and finds the body where it starts
    hdr = parse_request_header(frame, True)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (7, 3, 42, "c")
    assert frame[hdr.size :] == body
    mac, pos = ib.read_header_authenticator(frame, parse_request_header(frame).size)
    assert pos == hdr.size
    assert mac == ib.authenticator(SECRET, ib.CONTROLLED_SHUTDOWN, 3, 0, body)
    assert len(mac) == 32


def test_an_unsigned_header_has_no_authenticator():
    frame = ib.request_frame(ib.STOP_REPLICA, 4, 1, None, ib.StopReplicaRequest(0, 1, []))[4:]
    mac, pos = ib.read_header_authenticator(frame, parse_request_header(frame).size)
    assert mac is None and pos == parse_request_header(frame, True).size


@pytest.mark.parametrize(("api_key", "version"), [(4, 3), (5, 1), (6, 5), (7, 2), (7, 0)])
def test_a_non_flexible_version_cannot_carry_an_authenticator(api_key, version):
    with pytest.raises(ib.InterBrokerCodecError):
        ib.request_header(api_key, version, 1, "c", b"x" * 32)


def test_the_authenticator_binds_key_api_version_target_and_body():
    body = b"\x00\x01body"
    base = ib.authenticator(SECRET, 5, 4, 0, body)
    assert ib.authenticator(SECRET, 5, 4, 0, memoryview(b"xx" + body)[2:]) == base
    others = {
        ib.authenticator(bytes(32), 5, 4, 0, body),
        ib.authenticator(SECRET, 4, 4, 0, body),
        ib.authenticator(SECRET, 5, 3, 0, body),
        ib.authenticator(SECRET, 5, 4, 1, body),
        ib.authenticator(SECRET, 5, 4, 0, body + b"\x00"),
    }
    assert base not in others and len(others) == 5


@given(st.binary(max_size=64))
def test_hostile_header_tags_give_a_value_or_a_codec_error(tail):
    try:
        mac, pos = ib.read_header_authenticator(
            b"\x00\x05\x00\x04\x00\x00\x00\x01\xff\xff" + tail, 10
        )
    except ib.InterBrokerCodecError:
        return
    assert 10 < pos <= 10 + len(tail)
    assert mac is None or len(mac) <= len(tail)


def test_a_tag_count_far_beyond_the_bytes_fails_fast():
    with pytest.raises(ib.InterBrokerCodecError):
        ib.read_header_authenticator(b"\xfe\xff\xff\xff\x0f\x01\x00", 0)
