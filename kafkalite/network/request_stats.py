"""Per-API request counts, error counts and time histograms, as plain numbers.

Kafka's ``RequestMetrics`` (``RequestsPerSec``, ``ErrorsPerSec``, ``TotalTimeMs``,
``RequestQueueTimeMs``, ``LocalTimeMs``, ``RemoteTimeMs``, ``ResponseSendTimeMs``) are updated for every
request, so here they cost a few integer additions on the request path and
nothing else: a histogram is a list of counts indexed by the bit length of the
time in microseconds (bucket ``i`` holds times below ``2**i`` µs), turned into
Prometheus samples only when ``/metrics`` is scraped
(:mod:`kafkalite.server.metrics`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ApiStats", "BUCKET_BOUNDS_MS", "NUM_BUCKETS", "count_errors", "record_sends"]

#: finite buckets: upper bounds 2**0 .. 2**25 µs (1 µs .. 33.5 s), then +Inf
NUM_BUCKETS = 26
BUCKET_BOUNDS_MS = tuple((1 << i) / 1000.0 for i in range(NUM_BUCKETS))
#: slots per histogram: one per bit length of a time in µs, so no index is ever out of
#: range and the request path needs no clamp (slots past NUM_BUCKETS are +Inf)
_SLOTS = 64


class ApiStats:
    """One API's errors and times (its request count is ``RequestChannel.requests_total``).

    The histograms are TotalTimeMs, RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs
    and ResponseSendTimeMs: bucket counts (the last one is +Inf) and the sum in seconds.
    """

    __slots__ = (
        "requests",
        "errors",
        "total",
        "queue",
        "local",
        "remote",
        "send",
        "total_s",
        "queue_s",
        "local_s",
        "remote_s",
        "send_s",
    )

    def __init__(self) -> None:
        #: only for FetchConsumer / FetchFollower (the channel counts the APIs' requests)
        self.requests = 0
        #: error code -> occurrences in responses (Kafka's errorCounts, NONE included)
        self.errors: dict[int, int] = {}
        self.total = [0] * _SLOTS
        self.queue = [0] * _SLOTS
        self.local = [0] * _SLOTS
        self.remote = [0] * _SLOTS
        self.send = [0] * _SLOTS
        self.total_s = self.queue_s = self.local_s = self.remote_s = self.send_s = 0.0

    def record(self, queue_s: float, local_s: float, remote_s: float) -> None:
        """One response: its time waiting to be handled, in the handler, and after it."""
        if queue_s < 0.0:
            queue_s = 0.0
        total_s = queue_s + local_s + remote_s
        self.total[int(total_s * 1e6).bit_length()] += 1
        self.queue[int(queue_s * 1e6).bit_length()] += 1
        self.local[int(local_s * 1e6).bit_length()] += 1
        self.remote[int(remote_s * 1e6).bit_length()] += 1
        self.total_s += total_s
        self.queue_s += queue_s
        self.local_s += local_s
        self.remote_s += remote_s

    def add(self, other: ApiStats) -> None:
        """Add ``other``'s requests and times (not its errors) to these: the all-Fetch
        histograms are FetchConsumer's plus FetchFollower's, summed when scraped, so a
        Fetch is timed once on the request path."""
        self.requests += other.requests
        for attr in ("total", "queue", "local", "remote", "send"):
            mine: list[int] = getattr(self, attr)
            for i, c in enumerate(getattr(other, attr)):
                mine[i] += c
            s_attr = attr + "_s"
            setattr(self, s_attr, getattr(self, s_attr) + getattr(other, s_attr))

    def buckets(self, attr: str) -> list[int]:
        """A histogram's NUM_BUCKETS finite bucket counts and its +Inf count (not cumulative)."""
        counts: list[int] = getattr(self, attr)
        return [*counts[:NUM_BUCKETS], sum(counts[NUM_BUCKETS:])]

    def add_error(self, code: int, n: int = 1) -> None:
        errors = self.errors
        errors[code] = errors.get(code, 0) + n


def record_sends(marks: list[tuple[ApiStats, float]], now: float) -> None:
    """ResponseSendTimeMs of the responses written by the write that just drained their
    connection: each mark is ``(stats, encoded_at)``, its send time ``now - encoded_at``.

    Several responses can leave in one ``sendmsg``, so the send is not timed per
    response: a response's send time ends when the connection has no encoded byte
    left unwritten (every response encoded before then has been written)."""
    for stats, t in marks:
        d = now - t
        stats.send[int(d * 1e6).bit_length()] += 1
        stats.send_s += d
    marks.clear()


def count_errors(body: dict[str, Any], errors: dict[int, int]) -> None:
    """Add every ``error_code`` of a response dict, nested entries included (Kafka's
    ``AbstractResponse.errorCounts``: one per partition, topic, group ... carrying it;
    secondary codes such as CreateTopics' ``topic_config_error_code`` are not counted,
    as Kafka does not count them)."""
    for k, v in body.items():
        if type(v) is list:
            for e in v:
                if type(e) is dict:
                    count_errors(e, errors)
        elif type(v) is dict:
            count_errors(v, errors)
        elif k == "error_code" and v is not None:
            c = int(v)
            errors[c] = errors.get(c, 0) + 1
