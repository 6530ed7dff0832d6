"""Per-API request counts, error counts and time histograms, as plain numbers.

Kafka's ``RequestMetrics`` (``RequestsPerSec``, ``ErrorsPerSec``, ``TotalTimeMs``,
``RequestQueueTimeMs``, ``LocalTimeMs``, ``RemoteTimeMs``) are updated for every
request, so here they cost a few integer additions on the request path and
nothing else: a histogram is a list of counts indexed by the bit length of the
time in microseconds (bucket ``i`` holds times below ``2**i`` µs), turned into
Prometheus samples only when ``/metrics`` is scraped
(:mod:`kafkalite.server.metrics`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ApiStats", "BUCKET_BOUNDS_MS", "NUM_BUCKETS", "count_errors"]

#: finite buckets: upper bounds 2**0 .. 2**25 µs (1 µs .. 33.5 s); one more for +Inf
NUM_BUCKETS = 26
BUCKET_BOUNDS_MS = tuple((1 << i) / 1000.0 for i in range(NUM_BUCKETS))


class ApiStats:
    """One API's errors and times (its request count is ``RequestChannel.requests_total``).

    The four histograms are TotalTimeMs, RequestQueueTimeMs, LocalTimeMs and
    RemoteTimeMs: bucket counts (the last one is +Inf) and the sum in seconds.
    """

    __slots__ = (
        "requests",
        "errors",
        "total",
        "queue",
        "local",
        "remote",
        "total_s",
        "queue_s",
        "local_s",
        "remote_s",
    )

    def __init__(self) -> None:
        #: only for FetchConsumer / FetchFollower (the channel counts the APIs' requests)
        self.requests = 0
        #: error code -> occurrences in responses (Kafka's errorCounts, NONE included)
        self.errors: dict[int, int] = {}
        self.total = [0] * (NUM_BUCKETS + 1)
        self.queue = [0] * (NUM_BUCKETS + 1)
        self.local = [0] * (NUM_BUCKETS + 1)
        self.remote = [0] * (NUM_BUCKETS + 1)
        self.total_s = self.queue_s = self.local_s = self.remote_s = 0.0

    def record(self, queue_s: float, local_s: float, remote_s: float) -> None:
        """One response: its time waiting to be handled, in the handler, and after it."""
        if queue_s < 0.0:
            queue_s = 0.0
        total_s = queue_s + local_s + remote_s
        i = int(total_s * 1e6).bit_length()
        self.total[i if i < NUM_BUCKETS else NUM_BUCKETS] += 1
        self.total_s += total_s
        i = int(queue_s * 1e6).bit_length()
        self.queue[i if i < NUM_BUCKETS else NUM_BUCKETS] += 1
        self.queue_s += queue_s
        i = int(local_s * 1e6).bit_length()
        self.local[i if i < NUM_BUCKETS else NUM_BUCKETS] += 1
        self.local_s += local_s
        i = int(remote_s * 1e6).bit_length()
        self.remote[i if i < NUM_BUCKETS else NUM_BUCKETS] += 1
        self.remote_s += remote_s

    def add_error(self, code: int, n: int = 1) -> None:
        errors = self.errors
        errors[code] = errors.get(code, 0) + n


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
