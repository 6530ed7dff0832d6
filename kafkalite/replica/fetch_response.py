"""A follower's Fetch response (v12), parsed without copying its records.

kio's codec turns every partition's records into a new ``bytes`` (and needs
the whole frame as ``bytes`` first, another copy of a buffer the size of the
response); a follower appends those records to its log and drops them, so
both copies were pure cost on the replication path: every replicated byte
was copied twice more than the socket read and the log write need. This
reader walks the v12 layout once and hands the records out as ``memoryview``
slices of the frame's buffer, which ``Log.append_as_follower`` writes as they
are. Only what the fetcher uses is kept; tagged fields are skipped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_I32_I16_I32 = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PARTITION = struct.Struct(">ihqqq")  # index, error, high watermark, LSO, log start
_ABORTED = struct.Struct(">qq")


@dataclass(slots=True)
class FollowerPartitionData:
    partition_index: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    #: a view into the response frame (valid until the frame's buffer is reused)
    records: memoryview | None


@dataclass(slots=True)
class FollowerTopicData:
    topic: str
    partitions: list[FollowerPartitionData]


@dataclass(slots=True)
class FollowerFetchResponse:
    error_code: int
    session_id: int
    responses: list[FollowerTopicData]


def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ValueError("varint too long")


def _skip_tags(buf: memoryview, pos: int) -> int:
    n, pos = _uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


def parse_fetch_response_v12(
    frame: bytes | bytearray | memoryview, pos: int
) -> FollowerFetchResponse:
    """Parse a Fetch v12 response body starting at ``pos`` (after the response header).

    Raises ValueError on a frame that does not hold a whole response.
    """
    buf = memoryview(frame)
    end = len(buf)
    try:
        _throttle, error, session = _I32_I16_I32.unpack_from(buf, pos)
        pos += _I32_I16_I32.size
        n_topics, pos = _uvarint(buf, pos)
        topics: list[FollowerTopicData] = []
        for _ in range(n_topics - 1):
            name_len, pos = _uvarint(buf, pos)
            topic = bytes(buf[pos : pos + name_len - 1]).decode()
            pos += name_len - 1
            n_parts, pos = _uvarint(buf, pos)
            parts: list[FollowerPartitionData] = []
            for _ in range(n_parts - 1):
                index, perr, hw, _lso, log_start = _PARTITION.unpack_from(buf, pos)
                pos += _PARTITION.size
                n_aborted, pos = _uvarint(buf, pos)
                for _ in range(n_aborted - 1):  # 0: null
                    pos += _ABORTED.size
                    pos = _skip_tags(buf, pos)
                pos += 4  # preferred_read_replica
                size, pos = _uvarint(buf, pos)
                records = None
                if size:
                    if pos + size - 1 > end:
                        raise ValueError("records run past the frame")
                    records = buf[pos : pos + size - 1]
                    pos += size - 1
                pos = _skip_tags(buf, pos)
                parts.append(FollowerPartitionData(index, perr, hw, log_start, records))
            pos = _skip_tags(buf, pos)
            topics.append(FollowerTopicData(topic, parts))
        pos = _skip_tags(buf, pos)
    except (struct.error, IndexError) as e:
        raise ValueError(f"truncated fetch response: {e}") from None
    if pos > end:
        raise ValueError("truncated fetch response")
    return FollowerFetchResponse(error, session, topics)
