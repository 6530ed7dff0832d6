"""The inter-broker codecs on hostile bytes: whatever the counts, lengths, strings and
varints say, decoding ends in a value or InterBrokerCodecError, never another exception
(which would drop the connection with a traceback) and never an allocation sized by a
count the bytes cannot hold."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol import inter_broker as ib

_VERSIONS = [(k, v) for k, api in ib.CONTROLLER_APIS.items() for v in range(api.max_version + 1)]


def _request(api_key: int) -> object:
    if api_key == ib.LEADER_AND_ISR:
        s = ib.LeaderAndIsrPartitionState(3, 1, 0, 4, [0, 1], 2, [0, 1], [2], [1], True, 1)
        t = ib.LeaderAndIsrTopicState("topic", [s, s], uuid.uuid4())
        return ib.LeaderAndIsrRequest(0, 1, [t], [ib.LeaderAndIsrLiveLeader(0, "h", 9092)], 7)
    if api_key == ib.STOP_REPLICA:
        p = ib.StopReplicaPartitionState(0, 3, True)
        return ib.StopReplicaRequest(0, 1, [ib.StopReplicaTopicState("topic", [p, p])], 7, True)
    if api_key == ib.UPDATE_METADATA:
        s = ib.UpdateMetadataPartitionState(0, 1, 0, 4, [0], 2, [0, 1], [1])
        e = ib.UpdateMetadataEndpoint(9092, "host", "PLAINTEXT", 0)
        return ib.UpdateMetadataRequest(
            0,
            1,
            [ib.UpdateMetadataTopicState("topic", [s], uuid.uuid4())],
            [ib.UpdateMetadataBroker(0, [e], "rack")],
            7,
        )
    return ib.ControlledShutdownRequest(1, 7)


def _response(api_key: int) -> object:
    if api_key == ib.LEADER_AND_ISR:
        err = ib.LeaderAndIsrPartitionError(0, 0, "topic")
        return ib.LeaderAndIsrResponse(
            0,
            [err],
            [ib.LeaderAndIsrTopicError(uuid.uuid4(), [ib.LeaderAndIsrPartitionError(0, 0)])],
        )
    if api_key == ib.STOP_REPLICA:
        return ib.StopReplicaResponse(0, [ib.StopReplicaPartitionError("topic", 0, 0)])
    if api_key == ib.UPDATE_METADATA:
        return ib.UpdateMetadataResponse(0)
    return ib.ControlledShutdownResponse(0, [ib.RemainingPartition("topic", 1)])


def _decodes_or_codec_error(decode, api_key: int, version: int, data: bytes) -> None:
    try:
        decode(api_key, version, data)
    except ib.InterBrokerCodecError:
        pass


#: counts and lengths an attacker would pick: null, huge, negative, just past the end
_HOSTILE_WORDS = st.sampled_from(
    [b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xff\x0f",
     b"\x00", b"\xff\xff", b"\x7f\xff", b"\x00\x00\x00\x00"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(_VERSIONS),
    st.booleans(),
    st.data(),
)
def test_mutated_messages_decode_or_raise_the_codec_error(key_version, response, data):
    api_key, version = key_version
    if response:
        enc, dec = ib.encode_response, ib.decode_response
        good = enc(api_key, version, _response(api_key))
    else:
        enc, dec = ib.encode_request, ib.decode_request
        good = enc(api_key, version, _request(api_key))
    buf = bytearray(good)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(buf)))
        kind = data.draw(st.sampled_from(["word", "byte", "cut", "tail"]))
        if kind == "word":
            word = data.draw(_HOSTILE_WORDS)
            buf[pos : pos + len(word)] = word
        elif kind == "byte" and pos < len(buf):
            buf[pos] = data.draw(st.integers(0, 255))
        elif kind == "cut":
            del buf[pos:]
        else:
            buf += data.draw(st.binary(max_size=8))
    _decodes_or_codec_error(dec, api_key, version, bytes(buf))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_VERSIONS), st.binary(max_size=64))
def test_random_bytes_decode_or_raise_the_codec_error(key_version, data):
    api_key, version = key_version
    _decodes_or_codec_error(ib.decode_request, api_key, version, data)
    _decodes_or_codec_error(ib.decode_response, api_key, version, data)
