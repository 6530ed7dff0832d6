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
import fcntl
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from kafkalite.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_CHECKPOINT_FILE,
    CorruptCheckpointError,
    OffsetCheckpointFile,
    fsync_dir,
)
from kafkalite.log.cleaner import CleanerConfig, LogCleaner
from kafkalite.log.errors import KafkaStorageError, LogError
from kafkalite.log.log import (
    Log,
    _wall_clock_ms,
    parse_topic_partition_name,
    topic_partition_dir_name,
)
from kafkalite.log.log_config import LONG_MAX, LogConfig

__all__ = ["CLEAN_SHUTDOWN_FILE", "DELETE_DIR_SUFFIX", "LogManager"]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

TopicPartition = tuple[str, int]


def log_delete_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuid>-delete``, topic shortened to fit 255 bytes (as Kafka)."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic[: min(len(topic), 255 - len(suffix))] + suffix


class LogManager:
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
        topic_configs: Mapping[str, LogConfig] | None = None,
        cleaner_config: CleanerConfig | None = None,
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
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self.offline_dirs: set[Path] = set()
        #: callbacks told when a dir goes offline (the replica layer reacts)
        self.on_dir_offline: list[Callable[[Path], None]] = []
        self._pending_dir_deletes: list[tuple[int, Path, Log]] = []
        now = clock_ms()
        self._next_retention = now + retention_check_interval_ms
        self._next_flush_check = now + flush_check_interval_ms
        self._next_recovery_ckpt = now + recovery_point_checkpoint_interval_ms
        self._next_start_ckpt = now + log_start_offset_checkpoint_interval_ms
        self._stopping: asyncio.Event | None = None
        self._started = False
        self._locks: dict[Path, int] = {}
        self._closed = False
        #: compaction; its background loop runs inside :meth:`run` when log.cleaner.enable
        self.cleaner = LogCleaner(cleaner_config or CleanerConfig(), self, clock_ms=clock_ms)

    # ------------------------------------------------------------ startup

    def startup(self) -> None:
        """Load every ``<topic>-<partition>`` dir, recovering after an unclean shutdown."""
        for d in self.log_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
                self._lock_dir(d)
                self._load_dir(d)
            except OSError as e:
                log.error("log dir %s failed at startup: %s", d, e)
                self._mark_dir_offline(d)
        if len(self.offline_dirs) == len(self.log_dirs):
            raise KafkaStorageError("every log dir is offline")
        self._started = True

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
        if not clean:
            log.info("%s: no clean shutdown marker; recovering unflushed segments", d)
        for sub in sorted(d.iterdir()):
            if not sub.is_dir():
                continue
            name = sub.name
            if name.endswith(DELETE_DIR_SUFFIX):
                log.info("deleting %s left by an interrupted topic deletion", sub)
                shutil.rmtree(sub, ignore_errors=True)
                continue
            if name.endswith((FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
                log.warning("ignoring %s", sub)
                continue
            try:
                topic, partition = parse_topic_partition_name(name)
            except ValueError:
                log.warning("ignoring %s: not a <topic>-<partition> directory", sub)
                continue
            tp = (topic, partition)
            if tp in self._logs:
                raise LogError(f"duplicate log directories for {name}: {self._dir_of[tp]} and {d}")
            lg = Log(
                sub,
                self._topic_configs.get(topic, self.default_config),
                topic=topic,
                partition=partition,
                log_start_offset=start_offsets.get(tp, 0),
                recovery_point=recovery_points.get(tp, 0),
                clock_ms=self._clock,
                needs_recovery=not clean,
                on_io_error=self._on_log_io_error,
                on_truncate=self._on_log_truncated,
            )
            if lg.recovery_truncated_bytes:
                log.warning(
                    "%s: recovery truncated %d bytes of invalid data; log end offset is now %d",
                    lg.name,
                    lg.recovery_truncated_bytes,
                    lg.log_end_offset,
                )
            self._logs[tp] = lg
            self._dir_of[tp] = d
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

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """Existing log, or a new one on the online dir holding the fewest partitions."""
        tp = (topic, partition)
        existing = self._logs.get(tp)
        if existing is not None:
            return existing
        if config is not None:
            self._topic_configs[topic] = config
        online = self.online_dirs
        if not online:
            raise KafkaStorageError("no online log dir to create a log in")
        counts = {d: 0 for d in online}
        for used in self._dir_of.values():
            if used in counts:
                counts[used] += 1
        d = min(online, key=lambda x: counts[x])
        try:
            lg = Log(
                d / topic_partition_dir_name(topic, partition),
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
        self._logs[tp] = lg
        self._dir_of[tp] = d
        log.info("created log %s in %s", lg.name, d)
        return lg

    def delete_log(self, topic: str, partition: int) -> Log | None:
        """Rename to ``<topic>-<partition>.<uuid>-delete``; files go after file.delete.delay.ms."""
        tp = (topic, partition)
        lg = self._logs.pop(tp, None)
        if lg is None:
            return None
        d = self._dir_of.pop(tp)
        self.cleaner.remove_partition(d, tp)
        target = d / log_delete_dir_name(topic, partition)
        try:
            os.rename(lg.dir, target)
            fsync_dir(d)
        except OSError as e:
            log.error("failed to rename %s for deletion: %s", lg.dir, e)
            self._mark_dir_offline(d)
            return lg
        lg.mark_offline()  # deleted: no further reads or writes
        delay = self.default_config.file_delete_delay_ms
        if delay <= 0:
            self._delete_dir(target, lg)
        else:
            self._pending_dir_deletes.append((self._clock() + delay, target, lg))
        self._write_dir_checkpoints(d)
        return lg

    @staticmethod
    def _delete_dir(path: Path, lg: Log) -> None:
        lg.close_handlers()
        shutil.rmtree(path, ignore_errors=True)

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
        if self._closed:
            return
        for d in self.online_dirs:
            self._guard_dir(d, lambda d=d: self._write_recovery_points(d))

    def checkpoint_log_start_offsets(self) -> None:
        if self._closed:
            return
        for d in self.online_dirs:
            self._guard_dir(d, lambda d=d: self._write_log_start_offsets(d))

    def checkpoint_high_watermarks(
        self, hw_map: Mapping[TopicPartition, int] | None = None
    ) -> None:
        """Write ``replication-offset-checkpoint`` in each dir (default: each log's HW)."""
        if self._closed:
            return
        for d in self.online_dirs:

            def write(d: Path = d) -> None:
                hws = {
                    tp: (lg.high_watermark if hw_map is None else hw_map[tp])
                    for tp, lg in self._logs_in(d)
                    if hw_map is None or tp in hw_map
                }
                OffsetCheckpointFile(d / REPLICATION_CHECKPOINT_FILE).write(hws)

            self._guard_dir(d, write)

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

    def _write_recovery_points(self, d: Path) -> None:
        OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT_FILE).write(
            {tp: lg.recovery_point for tp, lg in self._logs_in(d)}
        )

    def _write_log_start_offsets(self, d: Path) -> None:
        OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT_FILE).write(
            {
                tp: lg.log_start_offset
                for tp, lg in self._logs_in(d)
                if lg.log_start_offset > lg.first_segment_base_offset
            }
        )

    def _write_dir_checkpoints(self, d: Path) -> None:
        if d not in self.offline_dirs:
            self._guard_dir(
                d, lambda: (self._write_recovery_points(d), self._write_log_start_offsets(d))
            )

    # ------------------------------------------------------------ maintenance

    def tick(self, now_ms: int | None = None) -> None:
        """Run whatever periodic work is due: retention, flush, checkpoints, deletes.

        Synchronous (fsyncs included); :meth:`run` does the same with the
        fsyncs of rolled segments on a worker thread.
        """
        if self._closed:
            return
        now = self._clock() if now_ms is None else now_ms
        self._maybe_retention(now)
        if now >= self._next_flush_check:
            self._next_flush_check = now + self.flush_check_interval_ms
            for lg in self._live_logs():
                self._each(lg, lambda lg=lg: self._flush_if_due(lg, now, rolled=True))
        self._maybe_checkpoint(now)
        self._reap(now)
        self.cleaner.tick(now)

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

    def _maybe_checkpoint(self, now: int) -> None:
        if now >= self._next_recovery_ckpt:
            self._next_recovery_ckpt = now + self.recovery_point_checkpoint_interval_ms
            self.checkpoint_recovery_points()
        if now >= self._next_start_ckpt:
            self._next_start_ckpt = now + self.log_start_offset_checkpoint_interval_ms
            self.checkpoint_log_start_offsets()

    def _flush_if_due(self, lg: Log, now: int, *, rolled: bool) -> None:
        cfg = lg.config
        if cfg.flush_ms < LONG_MAX and now - lg.last_flush_ms >= cfg.flush_ms:
            lg.flush()
        elif rolled and lg.recovery_point < lg.active_segment.base_offset:
            lg.flush(lg.active_segment.base_offset)

    def _reap(self, now: int) -> None:
        for lg in self._live_logs():
            self._each(lg, lambda lg=lg: lg.run_pending_deletes(now))
        if self._pending_dir_deletes:
            keep = []
            for due, path, lg in self._pending_dir_deletes:
                if due <= now:
                    self._delete_dir(path, lg)
                else:
                    keep.append((due, path, lg))
            self._pending_dir_deletes = keep

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
            if now >= self._next_flush_check:
                self._next_flush_check = now + self.flush_check_interval_ms
                await self._flush_in_thread(loop, now)
                if self._closed:  # shut down while the fsyncs ran
                    return
            self._maybe_checkpoint(now)
            self._reap(now)
            try:
                await asyncio.wait_for(self._stopping.wait(), interval_ms / 1000)
            except TimeoutError:
                pass

    async def _flush_in_thread(self, loop: asyncio.AbstractEventLoop, now: int) -> None:
        """fsync rolled segments off the event loop (Kafka's async flush on roll)."""
        jobs: list[tuple[Log, int, list[int], list[Path]]] = []
        for lg in self._live_logs():
            cfg = lg.config
            if cfg.flush_ms < LONG_MAX and now - lg.last_flush_ms >= cfg.flush_ms:
                self._each(lg, lg.flush)
                continue
            target = lg.active_segment.base_offset
            if lg.recovery_point < target:
                segs = lg.unflushed_segments(target)
                try:
                    fds = [os.dup(s.fileno()) for s in segs]
                except OSError:
                    continue
                paths = [
                    p
                    for s in segs
                    for p in (s.offset_index.path, s.time_index.path, s.txn_index.path)
                ]
                jobs.append((lg, target, fds, paths))
        if not jobs:
            return

        def fsync_all() -> list[bool]:
            ok = []
            for _lg, _t, fds, paths in jobs:
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
                ok.append(good)
            return ok

        results = await loop.run_in_executor(None, fsync_all)
        for (lg, target, _fds, _paths), good in zip(jobs, results, strict=True):
            if good and not lg.is_offline:
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
        """Flush and close every log, checkpoint, write the clean shutdown marker per dir.

        Call :meth:`checkpoint_high_watermarks` first if the replica layer has HWs to keep.
        """
        if self._closed:
            return
        if self._stopping is not None:
            self._stopping.set()
        self.cleaner.shutdown()
        for d in self.online_dirs:
            logs = self._logs_in(d)
            clean = True
            for _tp, lg in logs:
                try:
                    lg.flush()
                    lg.run_pending_deletes(force=True)
                    lg.close()
                except (OSError, KafkaStorageError) as e:
                    log.error("error closing %s: %s", lg.name, e)
                    clean = False
            if d in self.offline_dirs:
                continue
            try:
                self._write_recovery_points(d)
                self._write_log_start_offsets(d)
                if clean:
                    marker = d / CLEAN_SHUTDOWN_FILE
                    marker.touch()
                    fsync_dir(d)
            except OSError as e:
                log.error("log dir %s failed at shutdown: %s", d, e)
        for _due, path, lg in self._pending_dir_deletes:
            self._delete_dir(path, lg)
        self._pending_dir_deletes = []
        for lg in self._logs.values():
            if lg.is_offline:
                lg.close_handlers()
        self._logs.clear()
        self._dir_of.clear()
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
