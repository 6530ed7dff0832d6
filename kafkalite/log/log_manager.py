"""All logs of a broker across its log dirs: load, create, delete, maintain.

Layout of each log dir (Kafka's)::

    <dir>/meta.properties
    <dir>/recovery-point-offset-checkpoint
    <dir>/log-start-offset-checkpoint
    <dir>/replication-offset-checkpoint        (high watermarks, written for the replica layer)
    <dir>/.kafka_cleanshutdown                 (present only between a clean shutdown and the next start)
    <dir>/<topic>-<partition>/...

Without the clean-shutdown marker every segment at or after a log's recovery
point is re-validated at startup. A dir whose I/O fails is taken offline: its
logs raise KafkaStorageError (56) and the rest of the broker keeps serving.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from kafkalite.common.types import TopicPartition
from kafkalite.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_CHECKPOINT_FILE,
    CorruptCheckpointError,
    OffsetCheckpointFile,
    atomic_write,
    fsync_dir,
    syncfs,
    syncfs_available,
)
from kafkalite.log.cleaner import CleanerConfig, LogCleaner
from kafkalite.log.errors import KafkaStorageError, LogDirNotFound, LogError, ReplicaNotAvailable
from kafkalite.log.log import (
    Log,
    _wall_clock_ms,
    parse_topic_partition_name,
)
from kafkalite.log.log_config import LONG_MAX, LogConfig
from kafkalite.log.log_dir_move import FUTURE_DIR_SUFFIX, FutureLog, copy_rest, future_dir_name
from kafkalite.log.partition_dir import (
    UnsafeLogDir,
    direct_child,
    is_legal_topic_name,
    partition_dir,
)
from kafkalite.timer import loop_slices

__all__ = ["CLEAN_SHUTDOWN_FILE", "DELETE_DIR_SUFFIX", "LogManager"]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"


#: from this many logs to make durable at once, one syncfs(2) per dir replaces their fsyncs
BULK_SYNC_MIN_LOGS = 64


@dataclass(slots=True)
class _Deletions:
    """Logs renamed for deletion whose dirs still need their fsync and checkpoints."""

    #: log dir -> the partitions deleted from it
    removed: dict[Path, list[TopicPartition]] = field(default_factory=dict)
    #: renamed dirs to delete at once (file.delete.delay.ms <= 0), after the fsync
    due_now: list[tuple[Path, Log]] = field(default_factory=list)


def _remove_trees(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def log_delete_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuid>-delete``, topic shortened to fit 255 bytes (as Kafka)."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic[: min(len(topic), 255 - len(suffix))] + suffix


class LogManager:
    @classmethod
    def from_broker_config(
        cls,
        cfg: Any,
        default_config: LogConfig,
        *,
        clock_ms: Callable[[], int],
        topic_configs: Mapping[str, LogConfig],
        initial_offline_dirs: Iterable[Path],
    ) -> LogManager:
        """A broker's LogManager, its intervals read from the broker config (Kafka's names)."""
        return cls(
            cfg.log_dirs,
            default_config,
            clock_ms=clock_ms,
            retention_check_interval_ms=int(cfg["log.retention.check.interval.ms"]),
            recovery_point_checkpoint_interval_ms=int(
                cfg["log.flush.offset.checkpoint.interval.ms"]
            ),
            log_start_offset_checkpoint_interval_ms=int(
                cfg["log.flush.start.offset.checkpoint.interval.ms"]
            ),
            flush_check_interval_ms=int(cfg["log.flush.scheduler.interval.ms"]),
            high_watermark_checkpoint_interval_ms=int(
                cfg["replica.high.watermark.checkpoint.interval.ms"]
            ),
            recovery_threads_per_data_dir=int(cfg["num.recovery.threads.per.data.dir"]),
            producer_id_expiration_ms=int(cfg["producer.id.expiration.ms"]),
            producer_id_expiration_check_interval_ms=int(
                cfg["producer.id.expiration.check.interval.ms"]
            ),
            topic_configs=topic_configs,
            cleaner_config=CleanerConfig.from_properties(cfg),
            initial_offline_dirs=initial_offline_dirs,
        )

    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        *,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        retention_check_interval_ms: int = 300_000,
        flush_check_interval_ms: int = 1000,
        recovery_point_checkpoint_interval_ms: int = 60_000,
        log_start_offset_checkpoint_interval_ms: int = 60_000,
        high_watermark_checkpoint_interval_ms: int = 5000,
        recovery_threads_per_data_dir: int = 1,
        producer_id_expiration_ms: int = 86_400_000,
        producer_id_expiration_check_interval_ms: int = 600_000,
        topic_configs: Mapping[str, LogConfig] | None = None,
        cleaner_config: CleanerConfig | None = None,
        initial_offline_dirs: Iterable[Path] = (),
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d).absolute() for d in log_dirs]
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise ValueError("duplicate log dirs")
        self.default_config = default_config
        self._clock = clock_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.flush_check_interval_ms = flush_check_interval_ms
        self.recovery_point_checkpoint_interval_ms = recovery_point_checkpoint_interval_ms
        self.log_start_offset_checkpoint_interval_ms = log_start_offset_checkpoint_interval_ms
        self.high_watermark_checkpoint_interval_ms = high_watermark_checkpoint_interval_ms
        self.recovery_threads_per_data_dir = max(recovery_threads_per_data_dir, 1)
        #: producer.id.expiration.ms and its check interval
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        #: logs per dir, so placing a new log is O(dirs), not O(logs)
        self._dir_counts: dict[Path, int] = {d: 0 for d in self.log_dirs}
        self.offline_dirs: set[Path] = set()
        #: dirs that failed before the LogManager (meta.properties): offline from the start
        self._initial_offline = {Path(d).absolute() for d in initial_offline_dirs}
        #: callbacks told when a dir goes offline (the replica layer reacts)
        self.on_dir_offline: list[Callable[[Path], None]] = []
        self._pending_dir_deletes: list[tuple[int, Path, Log]] = []
        #: replicas moving to another log dir (AlterReplicaLogDirs), by partition
        self.future_logs: dict[TopicPartition, FutureLog] = {}
        #: Kafka's LogFlushRateAndTimeMs: logs flushed (fsynced) by the flusher and their time
        self.flush_count = 0
        self.flush_time_s = 0.0
        #: file deletions (expired segments, deleted partitions' dirs) run on one
        #: background thread, as Kafka's kafka-delete-logs: unlinking a 1 GiB
        #: segment takes 50-200 ms, too long to hold the broker's event loop
        self._deleter: concurrent.futures.ThreadPoolExecutor | None = None
        now = clock_ms()
        self._next_retention = now + retention_check_interval_ms
        self._next_flush_check = now + flush_check_interval_ms
        self._next_recovery_ckpt = now + recovery_point_checkpoint_interval_ms
        self._next_start_ckpt = now + log_start_offset_checkpoint_interval_ms
        self._next_hw_ckpt = now + high_watermark_checkpoint_interval_ms
        self._next_producer_expiry = now + producer_id_expiration_check_interval_ms
        #: checkpoint content last written per file (unchanged content is not rewritten)
        self._written: dict[Path, bytes] = {}
        #: serialises checkpoint writes of the worker thread and of shutdown
        self._checkpoint_lock = threading.Lock()
        self._shutting_down = False
        self._stopping: asyncio.Event | None = None
        self._started = False
        self._locks: dict[Path, int] = {}
        self._closed = False
        #: compaction; its background loop runs inside :meth:`run` when log.cleaner.enable
        self.cleaner = LogCleaner(cleaner_config or CleanerConfig(), self, clock_ms=clock_ms)

    # ------------------------------------------------------------ startup

    def startup(self) -> None:
        """Load every ``<topic>-<partition>`` dir, recovering after an unclean shutdown."""
        t0 = time.monotonic()
        for d in self.log_dirs:
            if d in self._initial_offline:
                self._mark_dir_offline(d)
                continue
            try:
                d.mkdir(parents=True, exist_ok=True)
                self._lock_dir(d)
                self._load_dir(d)
            except OSError as e:
                log.error("log dir %s failed at startup: %s", d, e)
                self._mark_dir_offline(d)
        if len(self.offline_dirs) == len(self.log_dirs):
            raise KafkaStorageError(
                "every log dir is offline: " + ", ".join(str(d) for d in self.log_dirs)
            )
        self._started = True
        log.info("loaded %d logs in %.0f ms", len(self._logs), (time.monotonic() - t0) * 1000)

    def _lock_dir(self, d: Path) -> None:
        """Kafka's ``.lock``: refuse a dir another broker (process or in-process) is using."""
        fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self._unlock_dirs()
            raise LogError(
                f"failed to acquire lock on file {LOCK_FILE} in {d}: a broker in another process or"
                " thread is using this directory"
            ) from None
        self._locks[d] = fd

    def _unlock_dirs(self) -> None:
        for fd in self._locks.values():
            try:
                os.close(fd)  # closing releases the flock
            except OSError:
                pass
        self._locks.clear()

    def _load_dir(self, d: Path) -> None:
        marker = d / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = self._read_checkpoint(d / RECOVERY_POINT_CHECKPOINT_FILE)
        start_offsets = self._read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT_FILE)
        high_watermarks = self._read_checkpoint(d / REPLICATION_CHECKPOINT_FILE)
        todo: list[tuple[Path, TopicPartition]] = []
        with os.scandir(d) as it:
            entries = sorted((e.name, e.is_dir()) for e in it)
        for name, is_dir in entries:
            if not is_dir:
                continue
            try:
                sub = direct_child(d, name)
            except UnsafeLogDir:
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                # in the background, as Kafka: start-up does not wait for gigabytes to go
                log.info("deleting %s left by an earlier topic deletion", sub)
                self._delete_in_background(partial(shutil.rmtree, sub, ignore_errors=True))
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                # a move between log dirs cut short by a stop: abandoned (Kafka resumes it)
                log.info("deleting %s left by an interrupted log dir move", sub)
                self._delete_in_background(partial(shutil.rmtree, sub, ignore_errors=True))
                continue
            if name.endswith(STRAY_DIR_SUFFIX):
                log.warning("ignoring %s", sub)
                continue
            try:
                tp = parse_topic_partition_name(name)
            except ValueError:
                log.warning("ignoring %s: not a <topic>-<partition> directory", sub)
                continue
            if not is_legal_topic_name(tp[0]):
                # it could never be created, named in a request or deleted safely
                log.warning("ignoring %s: %r is not a legal topic name", sub, tp[0])
                continue
            if tp in self._logs:
                raise LogError(f"duplicate log directories for {name}: {self._dir_of[tp]} and {d}")
            todo.append((sub, tp))

        if not clean and todo:
            # a brand-new (or empty) data dir has nothing to recover: say nothing
            log.info("%s: no clean shutdown marker; recovering unflushed segments", d)

        def load(job: tuple[Path, TopicPartition]) -> Log:
            sub, tp = job
            return Log(
                sub,
                self._topic_configs.get(tp[0], self.default_config),
                topic=tp[0],
                partition=tp[1],
                log_start_offset=start_offsets.get(tp, 0),
                recovery_point=recovery_points.get(tp, 0),
                clock_ms=self._clock,
                needs_recovery=not clean,
                on_io_error=self._on_log_io_error,
                on_truncate=self._on_log_truncated,
            )

        # num.recovery.threads.per.data.dir, for recovery only: re-validating segments is
        # file reads and CRC-32C, which release the GIL (385 MiB: 0.12 s -> 0.10 s with 2
        # threads); a clean load is many small Python steps and measured slower in threads
        # (10,000 logs: 1.4 s -> 1.9-2.1 s).
        threads = min(self.recovery_threads_per_data_dir, len(todo)) if not clean else 1
        if threads > 1:
            with concurrent.futures.ThreadPoolExecutor(
                threads, thread_name_prefix="log-recovery"
            ) as pool:
                logs = list(pool.map(load, todo))
        else:
            logs = [load(job) for job in todo]
        for (_sub, tp), lg in zip(todo, logs, strict=True):
            if lg.recovery_truncated_bytes:
                log.warning(
                    "%s: recovery truncated %d bytes of invalid data; log end offset is now %d",
                    lg.name,
                    lg.recovery_truncated_bytes,
                    lg.log_end_offset,
                )
            # Kafka restores the HW of each partition from replication-offset-checkpoint
            # (clamped to [log start, log end]); the replica layer only ever raises it.
            lg.update_high_watermark(high_watermarks.get(tp, 0))
            self._add_log(tp, lg, d)
        if clean:
            # A crash from here on must recover again.
            marker.unlink()

    @staticmethod
    def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(path).read()
        except CorruptCheckpointError as e:
            log.warning("%s; ignoring it", e)
            return {}

    # ------------------------------------------------------------ lookup / create / delete

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def logs_by_dir(self) -> dict[Path, list[Log]]:
        out: dict[Path, list[Log]] = {d: [] for d in self.log_dirs}
        for tp, lg in self._logs.items():
            out[self._dir_of[tp]].append(lg)
        return out

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def get_or_create_log(
        self, topic: str, partition: int, config: LogConfig | None = None, *, is_new: bool = True
    ) -> Log:
        """Existing log, or a new one on the online dir holding the fewest partitions.

        ``is_new=False`` (a LeaderAndIsr for a replica the controller did not just
        create) refuses to create one while any dir is offline, as Kafka does: the
        log may be in that dir, and an empty stand-in would serve (and replicate)
        an empty partition in its place.
        """
        tp = (topic, partition)
        existing = self._logs.get(tp)
        if config is not None:
            self._topic_configs[topic] = config
        if existing is not None:
            if config is not None and existing.config != config:
                existing.update_config(config)  # a log loaded before its topic config arrived
            return existing
        if not is_new and self.offline_dirs:
            dirs = ", ".join(sorted(str(d) for d in self.offline_dirs))
            raise KafkaStorageError(
                f"cannot create log {topic}-{partition}: it may be in offline log dir(s) {dirs}"
            )
        online = self.online_dirs
        if not online:
            raise KafkaStorageError("no online log dir to create a log in")
        counts = self._dir_counts
        d = min(online, key=lambda x: counts[x])
        path = partition_dir(d, topic, partition)  # UnsafeLogDir: nothing is created
        try:
            lg = Log(
                path,
                self.config_for(topic),
                topic=topic,
                partition=partition,
                clock_ms=self._clock,
                on_io_error=self._on_log_io_error,
                on_truncate=self._on_log_truncated,
            )
        except OSError as e:
            self._mark_dir_offline(d)
            raise KafkaStorageError(f"cannot create log {topic}-{partition} in {d}: {e}") from e
        self._add_log(tp, lg, d)
        log.info("created log %s in %s", lg.name, d)
        return lg

    # ------------------------------------------------------------ moves between log dirs

    def begin_move(self, tp: TopicPartition, dest: Path) -> FutureLog | None:
        """A future log for moving ``tp`` to ``dest`` (Kafka's
        ReplicaManager.alterReplicaLogDirs): None when there is nothing to start (already
        there, or already moving there). Raises LogDirNotFound, KafkaStorageError,
        ReplicaNotAvailable."""
        if not dest.is_absolute() or dest not in self.log_dirs:
            raise LogDirNotFound(f"Log dir {dest} is not found in the config.")
        if dest in self.offline_dirs:
            raise KafkaStorageError(f"Log dir {dest} is offline")
        lg = self._logs.get(tp)
        if lg is None:
            raise ReplicaNotAvailable(f"Replica for partition {tp[0]}-{tp[1]} is not available")
        existing = self.future_logs.get(tp)
        if existing is not None and existing.dest == dest:
            return None
        if existing is not None:
            self.abort_move(tp)
        if self._dir_of[tp] == dest:
            return None
        path = direct_child(dest, future_dir_name(*tp))
        try:
            path.mkdir()
        except OSError as e:
            self._mark_dir_offline(dest)
            raise KafkaStorageError(f"cannot create {path}: {e}") from e
        fut = FutureLog(tp, dest, path)
        self.future_logs[tp] = fut
        return fut

    def abort_move(self, tp: TopicPartition) -> None:
        fut = self.future_logs.pop(tp, None)
        if fut is not None:
            fut.cancelled = True
            self._delete_in_background(partial(shutil.rmtree, fut.dir, ignore_errors=True))

    def closed_segment_files(self, tp: TopicPartition) -> list[tuple[int, list[str]]]:
        """The files of every segment but the active one: what a move copies first."""
        lg = self._logs[tp]
        return [
            (
                seg.base_offset,
                [
                    p.name
                    for p in (
                        seg.log_path,
                        seg.offset_index.path,
                        seg.time_index.path,
                        seg.txn_index.path,
                    )
                    if p.exists()
                ],
            )
            for seg in lg.segments[:-1]
        ]

    def complete_move(self, fut: FutureLog) -> Log:
        """Swap the caught-up future log in (synchronous: nothing appends meanwhile) and
        return the partition's new log; the old dir goes after file.delete.delay.ms."""
        tp = fut.tp
        lg = self._logs[tp]
        src = self._dir_of[tp]
        self.cleaner.abort_cleaning(tp)
        lg.flush()
        lg.checkpoint_state()
        hw, start, leo = lg.high_watermark, lg.log_start_offset, lg.log_end_offset
        copy_rest(fut, lg.dir)
        final = direct_child(fut.dest, lg.dir.name)
        os.rename(fut.dir, final)
        new = Log(
            final,
            self.config_for(tp[0]),
            topic=tp[0],
            partition=tp[1],
            log_start_offset=start,
            recovery_point=leo,
            clock_ms=self._clock,
            on_io_error=self._on_log_io_error,
            on_truncate=self._on_log_truncated,
        )
        new.update_high_watermark(hw)
        target = direct_child(src, log_delete_dir_name(*tp))
        os.rename(lg.dir, target)
        lg.mark_offline()  # moved: the old log serves nothing more
        del self.future_logs[tp]
        self._dir_counts[src] -= 1
        self._logs.pop(tp)
        self._add_log(tp, new, fut.dest)
        delay = self.default_config.file_delete_delay_ms
        self._pending_dir_deletes.append((self._clock() + max(delay, 0), target, lg))
        log.info("moved log %s from %s to %s", new.name, src, fut.dest)
        return new

    def _add_log(self, tp: TopicPartition, lg: Log, d: Path) -> None:
        lg.file_deleter = self._delete_in_background
        lg.on_flush = self._flushed
        self._logs[tp] = lg
        self._dir_of[tp] = d
        self._dir_counts[d] += 1

    def delete_log(self, topic: str, partition: int) -> Log | None:
        """Rename to ``<topic>-<partition>.<uuid>-delete``; files go after file.delete.delay.ms.

        Raises UnsafeLogDir (nothing changed) for a log that is not directly inside
        its log dir; None when no such log is hosted here.
        """
        deletions = _Deletions()
        lg = self._detach_for_deletion((topic, partition), deletions)
        self._complete_deletions(deletions)
        return lg

    async def delete_logs(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, LogError]:
        """Delete many logs at once (a topic's deletion: StopReplica with delete).

        Each log is renamed as by :meth:`delete_log`; then each dir is fsynced once
        and its checkpoints (recovery points, log start offsets, the cleaner's) are
        rewritten once for the whole batch. One log at a time rewrote every
        checkpoint of the dir per log, O(N^2): deleting 4,000 partitions held the
        loop for a minute. The loop runs between renames (:func:`loop_slices.pause`).
        Returns the logs refused (UnsafeLogDir); logs not hosted here are skipped.
        """
        errors: dict[TopicPartition, LogError] = {}
        deletions = _Deletions()
        try:
            for tp in tps:
                try:
                    self._detach_for_deletion(tp, deletions)
                except LogError as e:
                    errors[tp] = e
                await loop_slices.pause()
        finally:
            self._complete_deletions(deletions)
        return errors

    def _detach_for_deletion(self, tp: TopicPartition, deletions: _Deletions) -> Log | None:
        """Forget the log and rename its dir; the dir's fsync and checkpoints are left
        to :meth:`_complete_deletions`."""
        lg = self._logs.get(tp)
        if lg is None:
            return None
        d = self._dir_of[tp]
        # both ends of the rename must be inside the log dir (a loaded log's dir always is)
        if lg.dir.parent != d:
            raise UnsafeLogDir(f"{lg.dir} is not directly inside log dir {d}")
        target = direct_child(d, log_delete_dir_name(*tp))
        del self._dir_of[tp]
        self._logs.pop(tp)
        self._dir_counts[d] -= 1
        self.cleaner.abort_cleaning(tp)  # before its files move
        deletions.removed.setdefault(d, []).append(tp)
        try:
            os.rename(lg.dir, target)
        except OSError as e:
            log.error("failed to rename %s for deletion: %s", lg.dir, e)
            self._mark_dir_offline(d)
            return lg
        lg.mark_offline()  # deleted: no further reads or writes
        delay = self.default_config.file_delete_delay_ms
        if delay <= 0:
            deletions.due_now.append((target, lg))
        else:
            self._pending_dir_deletes.append((self._clock() + delay, target, lg))
        return lg

    def _complete_deletions(self, deletions: _Deletions) -> None:
        """Make the renames durable (one fsync per dir), then drop the deleted logs
        from each dir's checkpoints (one rewrite per file)."""
        for d in deletions.removed:
            if d not in self.offline_dirs:
                fsync_dir(d)
        self._delete_dirs(deletions.due_now)
        for d, tps in deletions.removed.items():
            self.cleaner.remove_partitions(d, tps)
            self._write_dir_checkpoints(d)

    def _delete_dirs(self, dirs: list[tuple[Path, Log]]) -> None:
        """Close the logs' files; remove their renamed dirs in one background job (one
        job per dir cost a future and a lock each: 10,000 took 0.3 s of the loop)."""
        if not dirs:
            return
        for _path, lg in dirs:
            lg.close_handlers()
        paths = [path for path, _lg in dirs]
        self._delete_in_background(partial(_remove_trees, paths))

    def _delete_in_background(self, delete: Callable[[], None]) -> None:
        """Run ``delete`` on the kafka-delete-logs thread (inline once shut down)."""
        if self._closed:
            delete()
            return
        if self._deleter is None:
            self._deleter = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="kafka-delete-logs"
            )
        self._deleter.submit(delete)

    def wait_for_deletions(self) -> None:
        """Block until the deletions queued so far are done (shutdown, tests)."""
        if self._deleter is not None:
            self._deleter.submit(lambda: None).result()

    def update_config(self, topic: str, config: LogConfig) -> None:
        """New effective config for every partition of ``topic`` (AlterConfigs)."""
        self._topic_configs[topic] = config
        for (t, _p), lg in self._logs.items():
            if t == topic:
                lg.update_config(config)

    def update_default_config(self, config: LogConfig) -> None:
        """Broker-level log defaults changed; logs without topic overrides follow."""
        self.default_config = config
        for (t, _p), lg in self._logs.items():
            if t not in self._topic_configs:
                lg.update_config(config)

    # ------------------------------------------------------------ checkpoints

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoints(RECOVERY_POINT_CHECKPOINT_FILE)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoints(LOG_START_OFFSET_CHECKPOINT_FILE)

    def checkpoint_high_watermarks(
        self, hw_map: Mapping[TopicPartition, int] | None = None
    ) -> None:
        """Write ``replication-offset-checkpoint`` in each dir (default: each log's HW).

        The replica layer keeps every log's HW current (``Log.update_high_watermark``),
        so the LogManager writes this file itself, every
        replica.high.watermark.checkpoint.interval.ms and at shutdown, and
        restores each log's HW from it at start-up.
        """
        if hw_map is None:
            self._write_checkpoints(REPLICATION_CHECKPOINT_FILE)
            return
        if self._closed:
            return
        for d in self.online_dirs:
            entries = {tp: hw_map[tp] for tp, _lg in self._logs_in(d) if tp in hw_map}
            self._guard_dir(d, partial(self._write_file, d / REPLICATION_CHECKPOINT_FILE, entries))

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        """HWs from every online dir's ``replication-offset-checkpoint``."""
        out: dict[TopicPartition, int] = {}
        for d in self.online_dirs:
            out.update(self._read_checkpoint(d / REPLICATION_CHECKPOINT_FILE))
        return out

    def _logs_in(self, d: Path) -> list[tuple[TopicPartition, Log]]:
        return [
            (tp, lg) for tp, lg in self._logs.items() if self._dir_of[tp] == d and not lg.is_offline
        ]

    def _checkpoint_entries(self, name: str, d: Path) -> dict[TopicPartition, int]:
        logs = self._logs_in(d)
        if name == RECOVERY_POINT_CHECKPOINT_FILE:
            return {tp: lg.recovery_point for tp, lg in logs}
        if name == REPLICATION_CHECKPOINT_FILE:
            return {tp: lg.high_watermark for tp, lg in logs}
        return {
            tp: lg.log_start_offset
            for tp, lg in logs
            if lg.log_start_offset > lg.first_segment_base_offset
        }

    def _render(self, name: str, d: Path) -> tuple[Path, bytes] | None:
        """(file, content) of one checkpoint, or None when the file already holds it."""
        path = d / name
        data = OffsetCheckpointFile(path).render(self._checkpoint_entries(name, d))
        if self._written.get(path) == data:
            return None
        return path, data

    def _write_file(self, path: Path, entries: Mapping[TopicPartition, int]) -> None:
        data = OffsetCheckpointFile(path).render(entries)
        with self._checkpoint_lock:
            atomic_write(path, data)
        self._written[path] = data

    def _write_checkpoints(self, name: str) -> None:
        if self._closed:
            return
        for d in self.online_dirs:
            self._guard_dir(d, partial(self._write_checkpoint, name, d))

    def _write_checkpoint(self, name: str, d: Path) -> None:
        r = self._render(name, d)
        if r is not None:
            path, data = r
            with self._checkpoint_lock:
                atomic_write(path, data)
            self._written[path] = data

    def _write_dir_checkpoints(self, d: Path) -> None:
        if d not in self.offline_dirs:

            def write_both() -> None:
                self._write_checkpoint(RECOVERY_POINT_CHECKPOINT_FILE, d)
                self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT_FILE, d)

            self._guard_dir(d, write_both)

    def _due_checkpoints(self, now: int) -> list[str]:
        due = []
        if now >= self._next_recovery_ckpt:
            self._next_recovery_ckpt = now + self.recovery_point_checkpoint_interval_ms
            due.append(RECOVERY_POINT_CHECKPOINT_FILE)
        if now >= self._next_start_ckpt:
            self._next_start_ckpt = now + self.log_start_offset_checkpoint_interval_ms
            due.append(LOG_START_OFFSET_CHECKPOINT_FILE)
        if now >= self._next_hw_ckpt:
            self._next_hw_ckpt = now + self.high_watermark_checkpoint_interval_ms
            due.append(REPLICATION_CHECKPOINT_FILE)
        return due

    # ------------------------------------------------------------ maintenance

    def tick(self, now_ms: int | None = None) -> None:
        """Run whatever periodic work is due: retention, flush, checkpoints, deletes.

        Synchronous (fsyncs included); :meth:`run` does the same with the
        fsyncs and checkpoint writes on a worker thread.
        """
        if self._closed:
            return
        now = self._clock() if now_ms is None else now_ms
        self._maybe_retention(now)
        self._maybe_expire_producers(now)
        check_flush_ms = self._flush_check_due(now)
        for lg in self._live_logs():
            self._each(lg, partial(self._flush_if_due, lg, now, check_flush_ms))
        for name in self._due_checkpoints(now):
            self._write_checkpoints(name)
        self._reap(now)
        self.cleaner.tick(now)

    def _maybe_expire_producers(self, now: int) -> None:
        """Forget producer ids idle for producer.id.expiration.ms (Kafka's removeExpiredProducers)."""
        if now < self._next_producer_expiry:
            return
        self._next_producer_expiry = now + self.producer_id_expiration_check_interval_ms
        for lg in self._live_logs():
            lg.remove_expired_producers(now, self.producer_id_expiration_ms)

    def _maybe_retention(self, now: int) -> None:
        if now >= self._next_retention:
            self._next_retention = now + self.retention_check_interval_ms
            self.cleanup_logs()

    def cleanup_logs(self) -> int:
        """Retention pass over every log; returns segments deleted."""
        total = 0
        for lg in self._live_logs():
            try:
                total += lg.delete_old_segments()
            except KafkaStorageError:
                pass
        return total

    def _flush_check_due(self, now: int) -> bool:
        """log.flush.scheduler.interval.ms: when flush.ms is checked (Kafka's log flusher)."""
        if now >= self._next_flush_check:
            self._next_flush_check = now + self.flush_check_interval_ms
            return True
        return False

    def _flush_if_due(self, lg: Log, now: int, check_flush_ms: bool) -> None:
        cfg = lg.config
        if check_flush_ms and cfg.flush_ms < LONG_MAX and now - lg.last_flush_ms >= cfg.flush_ms:
            lg.flush()
        elif lg.recovery_point < lg.active_segment.base_offset:
            lg.flush(lg.active_segment.base_offset)  # rolled segments (Kafka flushes on roll)
        else:
            lg.leader_epoch_cache.sync_to_disk()

    def _flushed(self, seconds: float) -> None:
        """A log flushed itself (Log.flush) in ``seconds``: LogFlushRateAndTimeMs."""
        self.flush_count += 1
        self.flush_time_s += seconds

    def _reap(self, now: int) -> None:
        for lg in self._live_logs():
            self._each(lg, partial(lg.run_pending_deletes, now))
        if self._pending_dir_deletes:
            keep = []
            due_now = []
            for due, path, lg in self._pending_dir_deletes:
                if due <= now:
                    due_now.append((path, lg))
                else:
                    keep.append((due, path, lg))
            self._pending_dir_deletes = keep
            self._delete_dirs(due_now)

    async def run(self, interval_ms: int = 1000) -> None:
        """Maintenance loop for the broker's event loop; ends on :meth:`shutdown`."""
        self._stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        cleaner_task = loop.create_task(self.cleaner.run(), name="log-cleaner")
        try:
            await self._maintain(loop, interval_ms)
        finally:
            cleaner_task.cancel()

    async def _maintain(self, loop: asyncio.AbstractEventLoop, interval_ms: int) -> None:
        assert self._stopping is not None
        while not self._stopping.is_set() and not self._closed:
            now = self._clock()
            self._maybe_retention(now)
            self._maybe_expire_producers(now)
            await self._flush_in_thread(loop, now, self._flush_check_due(now))
            if self._closed:  # shut down while the fsyncs ran
                return
            due = self._due_checkpoints(now)
            if due:
                await self._checkpoints_in_thread(loop, due)
                if self._closed:
                    return
            self._reap(now)
            try:
                await asyncio.wait_for(self._stopping.wait(), interval_ms / 1000)
            except TimeoutError:
                pass

    async def _checkpoints_in_thread(
        self, loop: asyncio.AbstractEventLoop, names: list[str]
    ) -> None:
        """Render on the loop (consistent offsets), write and fsync on a worker thread."""
        jobs: list[tuple[Path, Path, bytes]] = []
        for d in self.online_dirs:
            for name in names:
                r = self._render(name, d)
                if r is not None:
                    jobs.append((d, *r))
        if not jobs:
            return

        def write_all() -> list[OSError | None]:
            out: list[OSError | None] = []
            with self._checkpoint_lock:
                if self._shutting_down:
                    return [None] * len(jobs)  # shutdown writes newer content itself
                for _d, path, data in jobs:
                    try:
                        atomic_write(path, data)
                        out.append(None)
                    except OSError as e:
                        out.append(e)
            return out

        results = await loop.run_in_executor(None, write_all)
        for (d, path, data), err in zip(jobs, results, strict=True):
            if err is None:
                self._written[path] = data
            else:
                log.error("I/O error in log dir %s: %s", d, err)
                self._mark_dir_offline(d)

    async def _flush_in_thread(
        self, loop: asyncio.AbstractEventLoop, now: int, check_flush_ms: bool
    ) -> None:
        """fsync rolled segments and new leader-epoch checkpoints off the event loop.

        Kafka flushes a rolled segment asynchronously right after the roll; a
        leader-epoch checkpoint written without fsync (see leader_epoch_cache) is
        fsynced in the same batch, always before the recovery point moves.
        """
        jobs: list[tuple[Log, int | None, list[int], list[Path], int | None]] = []
        dirs: set[Path] = set()
        for tp, lg in list(self._logs.items()):
            if lg.is_offline:
                continue
            cfg = lg.config
            if (
                check_flush_ms
                and cfg.flush_ms < LONG_MAX
                and now - lg.last_flush_ms >= cfg.flush_ms
            ):
                self._each(lg, lg.flush)
                continue
            cache = lg.leader_epoch_cache
            epoch_gen = cache.write_generation if cache.needs_fsync else None
            target: int | None = lg.active_segment.base_offset
            fds: list[int] = []
            paths: list[Path] = []
            if lg.recovery_point < target:  # type: ignore[operator]
                segs = lg.unflushed_segments(target)  # type: ignore[arg-type]
                try:
                    fds = [s.dup_fd() for s in segs]
                except OSError:
                    for fd in fds:
                        os.close(fd)
                    continue
                paths = [
                    p
                    for s in segs
                    for p in (s.offset_index.path, s.time_index.path, s.txn_index.path)
                ]
            else:
                target = None
            if epoch_gen is not None and cache.path is not None:
                paths.append(cache.path)
            if target is None and epoch_gen is None:
                continue
            jobs.append((lg, target, fds, paths, epoch_gen))
            dirs.add(self._dir_of[tp])
        if not jobs:
            return
        bulk = len(jobs) >= BULK_SYNC_MIN_LOGS and syncfs_available()

        def fsync_all() -> list[bool]:
            if bulk:
                return sync_in_bulk()
            ok = []
            for lg, _t, fds, paths, epoch_gen in jobs:
                good = True
                for fd in fds:
                    try:
                        os.fsync(fd)
                    except OSError:
                        good = False
                    finally:
                        os.close(fd)
                for path in paths:
                    try:
                        fd = os.open(path, os.O_RDONLY)
                    except OSError:
                        continue  # no txnindex, or renamed by retention meanwhile
                    try:
                        os.fsync(fd)
                    except OSError:
                        good = False
                    finally:
                        os.close(fd)
                if epoch_gen is not None:
                    fsync_dir(lg.dir)  # the checkpoint's rename
                ok.append(good)
            return ok

        def sync_in_bulk() -> list[bool]:
            """Many logs (say 10,000 new partitions): one syncfs per dir, not 20,000 fsyncs."""
            for _lg, _t, fds, _p, _g in jobs:
                for fd in fds:
                    os.close(fd)
            good = True
            for d in dirs:
                try:
                    syncfs(d)
                except OSError:
                    good = False
            return [good] * len(jobs)

        t0 = time.perf_counter()
        results = await loop.run_in_executor(None, fsync_all)
        self.flush_count += sum(1 for _lg, target, *_ in jobs if target is not None)
        self.flush_time_s += time.perf_counter() - t0
        for (lg, target, _fds, _paths, epoch_gen), good in zip(jobs, results, strict=True):
            if not good or lg.is_offline:
                continue
            if epoch_gen is not None:
                lg.leader_epoch_cache.mark_synced(epoch_gen)
            if target is not None and not lg.leader_epoch_cache.needs_fsync:
                lg.mark_flushed(target)

    def _live_logs(self) -> list[Log]:
        return [lg for lg in self._logs.values() if not lg.is_offline]

    def _each(self, lg: Log, fn: Callable[[], object]) -> None:
        try:
            fn()
        except KafkaStorageError:
            pass

    # ------------------------------------------------------------ shutdown

    def shutdown(self) -> None:
        """Checkpoint HWs, flush and close every log, checkpoint, write the clean shutdown
        marker per dir."""
        if self._closed:
            return
        with self._checkpoint_lock:
            self._shutting_down = True  # a background checkpoint write still queued is dropped
        if self._stopping is not None:
            self._stopping.set()
        self.cleaner.shutdown()
        for d in self.online_dirs:
            logs = self._logs_in(d)
            clean = True
            try:
                self._write_checkpoint(REPLICATION_CHECKPOINT_FILE, d)
            except OSError as e:
                log.error("error writing the high watermarks of %s: %s", d, e)
                clean = False
            # many logs: close them all unsynced, then one syncfs makes everything durable
            bulk = len(logs) >= BULK_SYNC_MIN_LOGS and syncfs_available()
            for _tp, lg in logs:
                try:
                    if not bulk:
                        lg.flush()
                    lg.run_pending_deletes(force=True)
                    lg.close(sync=not bulk)
                except (OSError, KafkaStorageError) as e:
                    log.error("error closing %s: %s", lg.name, e)
                    clean = False
            if bulk and clean:
                try:
                    syncfs(d)
                except OSError as e:
                    log.error("log dir %s failed to sync at shutdown: %s", d, e)
                    clean = False
                else:
                    for _tp, lg in logs:
                        lg.mark_flushed(lg.log_end_offset)
                        cache = lg.leader_epoch_cache
                        cache.mark_synced(cache.write_generation)
            if d in self.offline_dirs:
                continue
            try:
                self._write_checkpoint(RECOVERY_POINT_CHECKPOINT_FILE, d)
                self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT_FILE, d)
                if clean:
                    marker = d / CLEAN_SHUTDOWN_FILE
                    marker.touch()
                    fsync_dir(d)
            except OSError as e:
                log.error("log dir %s failed at shutdown: %s", d, e)
        # deleted partitions' dirs not due yet stay renamed (``-delete``) and go at the
        # next start-up, and deletions not begun are dropped: shutdown does not wait
        # for gigabytes to be unlinked (a renamed file is never loaded again)
        for _due, _path, lg in self._pending_dir_deletes:
            lg.close_handlers()
        self._pending_dir_deletes = []
        if self._deleter is not None:
            self._deleter.shutdown(wait=True, cancel_futures=True)
            self._deleter = None
        for lg in self._logs.values():
            if lg.is_offline:
                lg.close_handlers()
        self._logs.clear()
        self._dir_of.clear()
        self._dir_counts = dict.fromkeys(self.log_dirs, 0)
        self._unlock_dirs()
        self._closed = True

    # ------------------------------------------------------------ offline dirs

    def _guard_dir(self, d: Path, fn: Callable[[], object]) -> None:
        try:
            fn()
        except OSError as e:
            log.error("I/O error in log dir %s: %s", d, e)
            self._mark_dir_offline(d)

    def _on_log_truncated(self, lg: Log, end_offset: int) -> None:
        d = self._dir_of.get(lg.topic_partition)
        if d is not None:
            self.cleaner.on_truncated(d, lg, end_offset)

    def _on_log_io_error(self, lg: Log, err: OSError) -> None:
        d = self._dir_of.get(lg.topic_partition)
        if d is not None:
            self._mark_dir_offline(d)

    def _mark_dir_offline(self, d: Path) -> None:
        if d in self.offline_dirs:
            return
        log.error("marking log dir %s offline", d)
        self.offline_dirs.add(d)
        for tp, lg in self._logs.items():
            if self._dir_of[tp] == d:
                lg.mark_offline()
        for cb in self.on_dir_offline:
            try:
                cb(d)
            except Exception:  # noqa: BLE001 - a listener must not break the manager
                log.exception("log dir offline listener failed")
