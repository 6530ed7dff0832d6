"""Kafka's hierarchical timing wheel and delayed-operation purgatory, on asyncio.

No threads: the event loop is the reaper (one ``call_at`` handle per timer).
"""

from kafkalite.timer.delayed_operation import DelayedOperation
from kafkalite.timer.purgatory import DelayedOperationPurgatory
from kafkalite.timer.system_timer import Clock, DelayQueue, SystemTimer, monotonic_ms
from kafkalite.timer.timer_task import TimerTask, TimerTaskEntry
from kafkalite.timer.timer_task_list import TaskCounter, TimerTaskList
from kafkalite.timer.timing_wheel import BucketQueue, TimingWheel

__all__ = [
    "BucketQueue",
    "Clock",
    "DelayQueue",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "SystemTimer",
    "TaskCounter",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
    "monotonic_ms",
]
