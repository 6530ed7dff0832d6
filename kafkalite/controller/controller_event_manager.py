"""ControllerEventManager: the controller's single FIFO event queue (seed 000 §4).

Watch callbacks, scheduled ticks, StopReplica responses, ControlledShutdown
requests and topic-deletion resumes all become events, processed strictly one
at a time in arrival order by one asyncio task: Kafka's ControllerEventThread.
No handler ever runs concurrently with another, so the controller needs no
locks; a handler that awaits the store still holds the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

log = logging.getLogger(__name__)


class ControllerState(IntEnum):
    """Kafka's ControllerState values: what the ControllerState gauge reports."""

    IDLE = 0
    CONTROLLER_CHANGE = 1
    BROKER_CHANGE = 2
    TOPIC_CHANGE = 3
    TOPIC_DELETION = 4
    PARTITION_REASSIGNMENT = 5
    AUTO_LEADER_BALANCE = 6
    MANUAL_LEADER_BALANCE = 7
    CONTROLLED_SHUTDOWN = 8
    ISR_CHANGE = 9
    LEADER_AND_ISR_RESPONSE_RECEIVED = 10
    LOG_DIR_CHANGE = 11
    CONTROLLER_SHUTDOWN = 12


#: event name (before any ``:`` suffix) -> the state Kafka reports while processing it
_EVENT_STATES: dict[str, ControllerState] = {
    "Startup": ControllerState.CONTROLLER_CHANGE,
    "ControllerChange": ControllerState.CONTROLLER_CHANGE,
    "Expire": ControllerState.CONTROLLER_CHANGE,
    "RegisterBrokerAndReelect": ControllerState.CONTROLLER_CHANGE,
    "BrokerChange": ControllerState.BROKER_CHANGE,
    "TopicChange": ControllerState.TOPIC_CHANGE,
    "PartitionModifications": ControllerState.TOPIC_CHANGE,
    "TopicDeletion": ControllerState.TOPIC_DELETION,
    "TopicDeletionStopReplicaResponseReceived": ControllerState.TOPIC_DELETION,
    "PartitionReassignment": ControllerState.PARTITION_REASSIGNMENT,
    "PartitionReassignmentIsrChange": ControllerState.PARTITION_REASSIGNMENT,
    "ApiPartitionReassignment": ControllerState.PARTITION_REASSIGNMENT,
    "AutoPreferredReplicaLeaderElection": ControllerState.AUTO_LEADER_BALANCE,
    "PreferredReplicaLeaderElection": ControllerState.MANUAL_LEADER_BALANCE,
    "ReplicaLeaderElection": ControllerState.MANUAL_LEADER_BALANCE,
    "ControlledShutdown": ControllerState.CONTROLLED_SHUTDOWN,
    "IsrChangeNotification": ControllerState.ISR_CHANGE,
    "LeaderAndIsrResponseReceived": ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED,
    "LogDirEventNotification": ControllerState.LOG_DIR_CHANGE,
}


def controller_state_of(event_name: str) -> ControllerState:
    """The ControllerState an event puts the controller in (Idle for unknown ones)."""
    return _EVENT_STATES.get(event_name.split(":", 1)[0], ControllerState.IDLE)


@dataclass(slots=True)
class ControllerEvent:
    name: str
    process: Callable[[], Awaitable[Any]]
    future: asyncio.Future[Any] | None = None
    enqueued_at: float = field(default_factory=time.monotonic)


class ControllerEventManager:
    def __init__(
        self,
        on_error: Callable[[ControllerEvent, BaseException], Awaitable[None]] | None = None,
    ) -> None:
        self._queue: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._on_error = on_error
        self._closed = False
        #: event name -> how many were processed (observability and tests)
        self.processed: dict[str, int] = {}
        #: event name -> seconds spent processing them (Kafka's event-queue time metrics)
        self.busy_s: dict[str, float] = {}
        #: events taken off the queue, and their summed wait in it (EventQueueTimeMs)
        self.queue_time_count = 0
        self.queue_time_s = 0.0
        self.current: ControllerEvent | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="controller-event-thread"
        )

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while not self._queue.empty():
            ev = self._queue.get_nowait()
            if ev.future is not None and not ev.future.done():
                ev.future.cancel()

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    @property
    def state(self) -> ControllerState:
        """Kafka's ControllerState: what the event being processed is doing."""
        ev = self.current
        return ControllerState.IDLE if ev is None else controller_state_of(ev.name)

    def put(self, name: str, process: Callable[[], Awaitable[Any]]) -> asyncio.Future[Any]:
        """Queue an event; the future resolves with its result (or its exception)."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self._closed:
            fut.cancel()
            return fut
        self._queue.put_nowait(ControllerEvent(name, process, fut))
        return fut

    def put_nowait(self, name: str, process: Callable[[], Awaitable[Any]]) -> None:
        """Queue an event nobody waits for (watch callbacks, timers)."""
        if not self._closed:
            self._queue.put_nowait(ControllerEvent(name, process))

    async def _run(self) -> None:
        while True:
            ev = await self._queue.get()
            self.current = ev
            started = time.monotonic()
            self.queue_time_count += 1
            self.queue_time_s += started - ev.enqueued_at
            try:
                result = await ev.process()
            except asyncio.CancelledError:
                if ev.future is not None and not ev.future.done():
                    ev.future.cancel()
                raise
            except Exception as e:
                if self._on_error is not None:
                    try:
                        await self._on_error(ev, e)
                    except Exception:
                        log.exception("controller: handling the failure of %s failed", ev.name)
                else:
                    log.exception("controller: event %s failed", ev.name)
                if ev.future is not None and not ev.future.done():
                    ev.future.set_exception(e)
            else:
                if ev.future is not None and not ev.future.done():
                    ev.future.set_result(result)
            finally:
                self.current = None
                self.processed[ev.name] = self.processed.get(ev.name, 0) + 1
                self.busy_s[ev.name] = self.busy_s.get(ev.name, 0.0) + time.monotonic() - started
