"""How much work clients can make the broker hold: per connection and broker-wide.

Kafka reads one request per connection at a time: a channel is muted from the
moment a request is read until its response has been written, so a client that
does not read its responses stops being read (TCP pushes back on it). Requests
then wait in one queue of ``queued.max.requests`` (the network threads block
when it is full) and their bytes come from a pool of ``queued.max.request.bytes``
(a channel that cannot get memory for its next request is muted).

kafkalite pipelines instead (responses still leave in request order), so the
same protections take two forms here:

- :class:`ConnectionLimits`: a connection stops being read while it has
  ``max_inflight`` requests whose responses are not written yet, or
  ``max_queued_bytes`` of encoded responses waiting for its socket. It is read
  again as soon as its responses drain.
- :class:`RequestQueue`: Kafka's two keys, broker-wide. Here a request is handled
  as soon as it is read, so what queues up is handlers that have not finished
  (coroutines: admin calls, group operations) and frames still being received.
  Purgatory waits (long-poll fetches, acks=all produces) are not counted: in
  Kafka too a delayed operation has left the request queue. While either bound
  is reached, connections start no new request until the count drops.
  Connections that carry controller requests are exempt (Kafka gives them a
  separate control-plane queue), so clients cannot starve LeaderAndIsr.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Per-connection bounds; reading stops at either and resumes when responses drain."""

    #: requests dispatched whose responses are not yet written (pipelining depth)
    max_inflight: int = 100
    #: bytes of encoded responses not yet written to the socket
    max_queued_bytes: int = 1 << 20


class RequestQueue:
    """Broker-wide count and bytes of requests in progress (``queued.max.requests`` / ``.bytes``).

    ``paused`` is what connections check before starting a request; connections
    that stopped reading because of it register with :meth:`wait` and are resumed
    (each through its own callback, on a later loop iteration) when it clears.
    """

    __slots__ = ("max_requests", "max_bytes", "requests", "bytes", "paused", "_waiting")

    def __init__(self, max_requests: int = 500, max_bytes: int = -1) -> None:
        self.max_requests = max_requests
        #: <= 0: no bound on bytes (Kafka's -1)
        self.max_bytes = max_bytes
        self.requests = 0
        self.bytes = 0
        self.paused = False
        self._waiting: dict[int, Callable[[], None]] = {}

    def acquire(self, nbytes: int) -> None:
        """A handler started that will finish later (its frame is ``nbytes`` long)."""
        self.requests += 1
        self.bytes += nbytes
        self._update()

    def release(self, nbytes: int) -> None:
        self.requests -= 1
        self.bytes -= nbytes
        self._update()

    def reserve(self, delta: int) -> None:
        """Bytes of frames being received (negative: given back)."""
        self.bytes += delta
        self._update()

    def wait(self, key: int, resume: Callable[[], None]) -> None:
        """Call ``resume`` (once) when the queue is no longer paused."""
        self._waiting[key] = resume

    def forget(self, key: int) -> None:
        self._waiting.pop(key, None)

    def _update(self) -> None:
        paused = self.requests >= self.max_requests or (
            self.max_bytes > 0 and self.bytes >= self.max_bytes
        )
        if paused is self.paused:
            return
        self.paused = paused
        if not paused and self._waiting:
            waiting, self._waiting = self._waiting, {}
            loop = asyncio.get_running_loop()
            for resume in waiting.values():
                loop.call_soon(resume)
