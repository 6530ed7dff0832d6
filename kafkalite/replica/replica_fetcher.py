"""Followers fetching from their leaders (Kafka's ReplicaFetcherManager / ReplicaFetcherThread).

One :class:`ReplicaFetcher` per source broker, an asyncio task, keeps the
partitions this broker follows on that leader. Each partition starts in the
*truncating* state: the fetcher asks the leader OffsetForLeaderEpoch (API 23)
for the end offset of the follower's latest epoch and truncates its log there
(KIP-101/279), never to its high watermark alone, which is what keeps replicas
identical across leader changes. It then fetches (Fetch v12, ``replica_id`` set)
from its log end offset and appends the leader's batches verbatim
(``Log.append_as_follower``: offsets, leader epochs, producer ids and sequences
and timestamps as the leader wrote them); the follower's high watermark is the
leader's, bounded by its own log end offset.

The client is a small one over asyncio streams with kio's codecs, in this layer
(the controller's channel is a sibling layer and carries only controller APIs).
A response is applied only if the partition is still fetched from the same
state (same leader epoch, same offset) it was requested with: a LeaderAndIsr
or a truncation that came meanwhile wins, as in Kafka's fetcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.common import structs
from kafkalite.common.types import TopicPartition
from kafkalite.log.errors import LogError
from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol import messages, sasl_client
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.frame_reader import FrameProtocol, attach
from kafkalite.protocol.headers import skip_tagged_fields
from kafkalite.protocol.sasl_client import SaslClientCredentials
from kafkalite.replica.fetch_response import FollowerFetchResponse, parse_fetch_response_v12

if TYPE_CHECKING:
    from kafkalite.replica.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # topic names, replica_id in the body, flexible
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
_HDR = struct.Struct(">hhi")

_RETRY_LATER = {
    int(ErrorCode.not_leader_or_follower),
    int(ErrorCode.unknown_leader_epoch),
    int(ErrorCode.unknown_topic_or_partition),
    int(ErrorCode.kafka_storage_error),
    int(ErrorCode.request_timed_out),
    int(ErrorCode.replica_not_available),
    int(ErrorCode.leader_not_available),
}


@dataclass(frozen=True, slots=True)
class SourceBroker:
    id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    broker_id: int
    fetch_wait_max_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 1 << 20  # per partition (replica.fetch.max.bytes)
    fetch_response_max_bytes: int = 10 << 20
    backoff_ms: int = 1000
    request_timeout_ms: int = 30000


@dataclass(slots=True)
class PartitionFetchState:
    """One followed partition: its leader's epoch, where to fetch, and how."""

    topic_id: uuid.UUID
    leader_epoch: int
    fetch_offset: int = -1
    truncating: bool = True
    delayed_until: float = 0.0


class ReplicaFetcher:
    """Fetches every partition this broker follows on one leader broker."""

    def __init__(
        self,
        source: SourceBroker,
        replica_manager: ReplicaManager,
        config: FetcherConfig,
        ssl_context: ssl.SSLContext | None,
        secret: Callable[[], bytes | None] = lambda: None,
        sasl: SaslClientCredentials | None = None,
    ) -> None:
        self.source = source
        #: the broker's SASL credentials when the leader's inter-broker listener is SASL
        self.sasl = sasl
        #: the cluster's inter-broker secret: follower requests are signed with it
        self._secret = secret
        self.rm = replica_manager
        self.config = config
        self.ssl_context = ssl_context
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self._wake = asyncio.Event()
        #: the connection to the leader (responses read straight into their buffers)
        self._conn: FrameProtocol | None = None
        self._correlation = itertools.count(1)
        #: time of the last successful response (a metric, and for tests)
        self.last_response_ms = 0
        #: the incremental fetch session (KIP-227, Kafka's FetchSessionHandler): its id
        #: (0: none), the epoch of the next request, and what the leader has cached per
        #: partition (fetch offset, log start offset, leader epoch)
        self.session_id = 0
        self.session_epoch = 0
        self._session_parts: dict[TopicPartition, tuple[int, int, int]] = {}
        #: full and incremental fetches sent (tests, debugging)
        self.full_fetches = 0
        self.incremental_fetches = 0
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{config.broker_id}-from-{source.id}"
        )

    # ---- partitions ----------------------------------------------------------------
    def add(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        self.partitions[tp] = state
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    # ---- the loop --------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = self.config.backoff_ms / 1000
        try:
            while True:
                now = time.monotonic()
                ready = {tp: st for tp, st in self.partitions.items() if st.delayed_until <= now}
                if not ready:
                    self._wake.clear()
                    delays = [st.delayed_until - now for st in self.partitions.values()]
                    timeout = min(delays) if delays else None
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(timeout):
                            await self._wake.wait()
                    continue
                try:
                    truncating = {tp: st for tp, st in ready.items() if st.truncating}
                    if truncating:
                        await self._truncate(truncating)
                        continue
                    await self._fetch(ready)
                except (OSError, EOFError, TimeoutError, ValueError) as e:
                    self._disconnect()
                    self._reset_session()
                    log.debug(
                        "broker %d: fetch from broker %d failed (%r); backing off",
                        self.config.broker_id,
                        self.source.id,
                        e,
                    )
                    await asyncio.sleep(backoff)
        finally:
            self._disconnect()

    async def _truncate(self, parts: dict[TopicPartition, PartitionFetchState]) -> None:
        """KIP-279: ask the leader where our latest epoch ends there and truncate to it."""
        asks: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        for tp, st in parts.items():
            p = self.rm.get_partition(tp)
            if p is None or p.log is None or p.leader_epoch != st.leader_epoch:
                self.remove(tp)
                continue
            latest = p.log.latest_epoch
            if latest is None:
                # no epoch known (an empty or pre-epoch log): the high watermark is all we have
                self.rm.truncate_to(tp, p.log.high_watermark)
                st.fetch_offset = p.log.log_end_offset
                st.truncating = False
                continue
            asks[tp] = (st, latest)
        if not asks:
            return
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), (st, latest) in asks.items():
            by_topic.setdefault(topic, []).append(
                {
                    "partition": partition,
                    "current_leader_epoch": st.leader_epoch,
                    "leader_epoch": latest,
                }
            )
        resp = await self._call(
            23,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            {
                "replica_id": self.config.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            },
        )
        for t in resp.topics:
            for r in t.partitions:
                tp = (str(t.topic), int(r.partition))
                asked = asks.get(tp)
                if asked is None or self.partitions.get(tp) is not asked[0]:
                    continue
                st, latest = asked
                code = int(r.error_code)
                if code:
                    self._on_partition_error(tp, st, code)
                    continue
                self._apply_epoch_end_offset(tp, st, int(r.leader_epoch), int(r.end_offset))

    def _apply_epoch_end_offset(
        self, tp: TopicPartition, st: PartitionFetchState, leader_epoch: int, end_offset: int
    ) -> None:
        """Kafka's AbstractFetcherThread.getOffsetTruncationState."""
        p = self.rm.get_partition(tp)
        if p is None or p.log is None:
            self.remove(tp)
            return
        plog = p.log
        leo = plog.log_end_offset
        complete = True
        if end_offset < 0:
            target = plog.high_watermark  # the leader knows no such epoch (an old log)
        elif leader_epoch < 0:
            target = min(end_offset, leo)
        else:
            follower_epoch, follower_end = plog.end_offset_for_epoch(leader_epoch)
            if follower_epoch < 0:
                target = min(end_offset, leo)
            elif follower_epoch != leader_epoch:
                # we do not know the leader's epoch: cut to the end of our largest epoch
                # below it, then ask again with that one
                target = min(follower_end, leo)
                complete = False
            else:
                target = min(follower_end, end_offset, leo)
        if target < leo:
            log.info(
                "broker %d: truncating %s-%d from %d to %d (leader %d epoch %d ends at %d)",
                self.config.broker_id,
                tp[0],
                tp[1],
                leo,
                target,
                self.source.id,
                leader_epoch,
                end_offset,
            )
            self.rm.truncate_to(tp, target)
        st.fetch_offset = plog.log_end_offset
        st.truncating = not complete

    def _reset_session(self) -> None:
        """The next fetch is a full one that opens a new session."""
        self.session_id, self.session_epoch = 0, 0
        self._session_parts = {}

    async def _fetch(self, parts: dict[TopicPartition, PartitionFetchState]) -> None:
        """One Fetch: full when no session is open (it opens one), else incremental: only
        partitions whose fetch state changed, and the ones no longer fetched forgotten."""
        cfg = self.config
        wanted: dict[TopicPartition, tuple[int, int, int]] = {}
        sent: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        quota = self.rm.follower_quota
        over_quota = quota.is_exceeded()
        throttled: set[TopicPartition] = set()
        for tp, st in parts.items():
            p = self.rm.get_partition(tp)
            if p is None or p.log is None or p.leader_epoch != st.leader_epoch:
                self.remove(tp)
                continue
            if self.rm.follower_throttled(tp):
                if over_quota:
                    quota.throttled += 1
                    continue  # KIP-73: left out of this fetch
                throttled.add(tp)
            st.fetch_offset = p.log.log_end_offset
            sent[tp] = (st, st.fetch_offset)
            wanted[tp] = (st.fetch_offset, p.log.log_start_offset, st.leader_epoch)
        if not sent:
            if parts:  # everything held back by the follower quota
                await asyncio.sleep(min(cfg.backoff_ms, 100) / 1000)
            return
        incremental = self.session_id != 0
        cached = self._session_parts
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, (offset, log_start, epoch) in wanted.items():
            if incremental and cached.get(tp) == (offset, log_start, epoch):
                continue
            by_topic.setdefault(tp[0], []).append(
                {
                    "partition": tp[1],
                    "current_leader_epoch": epoch,
                    "fetch_offset": offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": log_start,
                    "partition_max_bytes": cfg.fetch_max_bytes,
                }
            )
        forgotten: dict[str, list[int]] = {}
        if incremental:
            for tp in cached.keys() - wanted.keys():
                forgotten.setdefault(tp[0], []).append(tp[1])
            self.incremental_fetches += 1
        else:
            self.full_fetches += 1
        conn, frame, pos = await self._request(
            1,
            FETCH_VERSION,
            {
                "replica_id": cfg.broker_id,
                "max_wait": cfg.fetch_wait_max_ms,
                "min_bytes": cfg.fetch_min_bytes,
                "max_bytes": cfg.fetch_response_max_bytes,
                "isolation_level": 0,
                "session_id": self.session_id,
                "session_epoch": self.session_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                "forgotten_topics_data": [
                    {"topic": t, "partitions": ps} for t, ps in forgotten.items()
                ],
                "rack_id": "",
            },
            timeout_s=cfg.request_timeout_ms / 1000 + cfg.fetch_wait_max_ms / 1000,
        )
        try:
            # records are views of the frame, appended before the frame's buffer is reused
            resp = parse_fetch_response_v12(frame, pos)
            self._apply_fetch_response(resp, wanted, sent, throttled)
        finally:
            conn.recycle(frame)

    def _apply_fetch_response(
        self,
        resp: FollowerFetchResponse,
        wanted: dict[TopicPartition, tuple[int, int, int]],
        sent: dict[TopicPartition, tuple[PartitionFetchState, int]],
        throttled: set[TopicPartition],
    ) -> None:
        cfg = self.config
        quota = self.rm.follower_quota
        top_error = int(resp.error_code)
        if top_error in (
            ErrorCode.fetch_session_id_not_found,
            ErrorCode.invalid_fetch_session_epoch,
        ):
            self._reset_session()  # evicted or out of step: start over with a full fetch
            return
        if top_error:
            raise ValueError(f"fetch error {top_error}")
        if int(resp.session_id) != 0:
            self.session_id = int(resp.session_id)
            self.session_epoch = 1 if self.session_epoch == 2**31 - 1 else self.session_epoch + 1
            self._session_parts = wanted
        else:
            self._reset_session()  # the leader keeps no session for us: full fetches
        self.last_response_ms = int(time.time() * 1000)
        for t in resp.responses:
            for r in t.partitions:
                tp = (t.topic, r.partition_index)
                entry = sent.get(tp)
                if entry is None:
                    continue
                st, offset = entry
                if self.partitions.get(tp) is not st or st.fetch_offset != offset or st.truncating:
                    continue  # changed while the request was out
                code = r.error_code
                if code == ErrorCode.offset_out_of_range:
                    self._on_out_of_range(tp, st, r.log_start_offset)
                    continue
                if code:
                    self._on_partition_error(tp, st, code)
                    continue
                try:
                    records = r.records or b""
                    if tp in throttled:
                        quota.record(len(records))
                    st.fetch_offset = self.rm.append_as_follower(
                        tp,
                        st.leader_epoch,
                        records,
                        r.high_watermark,
                        r.log_start_offset,
                    )
                except (KafkaError, LogError) as e:
                    log.warning(
                        "broker %d: cannot append %s-%d fetched from %d: %r",
                        self.config.broker_id,
                        tp[0],
                        tp[1],
                        self.source.id,
                        e,
                    )
                    st.truncating = True
                    st.delayed_until = time.monotonic() + cfg.backoff_ms / 1000

    def _on_out_of_range(
        self, tp: TopicPartition, st: PartitionFetchState, leader_lso: int
    ) -> None:
        """Below the leader's log start: restart there; otherwise truncate by epoch again."""
        p = self.rm.get_partition(tp)
        if p is None or p.log is None:
            self.remove(tp)
            return
        if st.fetch_offset < leader_lso:
            log.info(
                "broker %d: %s-%d at %d is below the leader's log start %d: starting over there",
                self.config.broker_id,
                tp[0],
                tp[1],
                st.fetch_offset,
                leader_lso,
            )
            self.rm.truncate_fully_and_start_at(tp, leader_lso)
            st.fetch_offset = leader_lso
        else:
            st.truncating = True

    def _on_partition_error(self, tp: TopicPartition, st: PartitionFetchState, code: int) -> None:
        if code == ErrorCode.fenced_leader_epoch:
            # the leader moved on: wait for our LeaderAndIsr (it re-adds the partition)
            self.remove(tp)
            return
        if code not in _RETRY_LATER:
            log.warning(
                "broker %d: %s-%d from broker %d: error %s",
                self.config.broker_id,
                tp[0],
                tp[1],
                self.source.id,
                ErrorCode(code).name,
            )
        st.delayed_until = time.monotonic() + self.config.backoff_ms / 1000

    # ---- the wire --------------------------------------------------------------------
    async def _call(
        self, api_key: int, version: int, body: dict[str, Any], timeout_s: float | None = None
    ) -> Any:
        """Send a request and decode its response with kio's codecs."""
        conn, frame, pos = await self._request(api_key, version, body, timeout_s)
        data = frame if type(frame) is bytes else bytes(frame)
        conn.recycle(frame)
        return messages.decode_response(api_key, version, data, pos)

    async def _request(
        self, api_key: int, version: int, body: dict[str, Any], timeout_s: float | None = None
    ) -> tuple[FrameProtocol, bytes | memoryview, int]:
        """Send a request; its connection, response frame (a view to give back with
        ``conn.recycle``) and where the body starts."""
        async with asyncio.timeout(timeout_s or self.config.request_timeout_ms / 1000):
            conn = self._conn
            if conn is None:
                reader, writer = await sasl_client.open_connection(
                    self.source.host, self.source.port, ssl=self.ssl_context, sasl=self.sasl
                )
                conn = self._conn = attach(reader, writer)
            cid = next(self._correlation) & 0x7FFFFFFF
            req_cls = messages.request_type(api_key, version)
            flexible = bool(req_cls.__flexible__)  # type: ignore[attr-defined]
            client_id = f"replica-fetcher-{self.config.broker_id}".encode()
            encoded = messages.encode(messages.build(req_cls, body))
            tags = b""
            if flexible:
                # signed for the leader, as controller requests are: only brokers' follower
                # requests are obeyed (Kafka's CLUSTER_ACTION)
                secret = self._secret()
                mac = (
                    None
                    if secret is None
                    else ib.authenticator(secret, api_key, version, self.source.id, encoded)
                )
                tags = ib.header_tagged_fields(mac)
            header = (
                _HDR.pack(api_key, version, cid)
                + structs.I16.pack(len(client_id))
                + client_id
                + tags
            )
            payload = header + encoded
            conn.write(structs.I32.pack(len(payload)) + payload)
            await conn.drain()
            frame = await conn.read_frame_view()
        got = structs.I32.unpack_from(frame, 0)[0]
        if got != cid:
            conn.recycle(frame)
            raise ValueError(f"correlation id {got}, expected {cid}")
        pos = skip_tagged_fields(frame, 4) if flexible else 4
        return conn, frame, pos

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None


class ReplicaFetcherManager:
    """The fetchers of one broker, one per source broker (num.replica.fetchers = 1)."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        config: FetcherConfig,
        ssl_context: Callable[[], ssl.SSLContext | None] = lambda: None,
        secret: Callable[[], bytes | None] = lambda: None,
        sasl: Callable[[], SaslClientCredentials | None] = lambda: None,
    ) -> None:
        self.rm = replica_manager
        self._sasl = sasl
        self.config = config
        self._ssl_context = ssl_context
        self._secret = secret
        self.fetchers: dict[SourceBroker, ReplicaFetcher] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    def add_fetcher_for_partition(
        self, tp: TopicPartition, source: SourceBroker, state: PartitionFetchState
    ) -> None:
        self.remove_fetcher_for_partitions([tp])
        fetcher = self.fetchers.get(source)
        if fetcher is None:
            fetcher = ReplicaFetcher(
                source, self.rm, self.config, self._ssl_context(), self._secret, self._sasl()
            )
            self.fetchers[source] = fetcher
        fetcher.add(tp, state)

    def remove_fetcher_for_partitions(self, tps: list[TopicPartition]) -> None:
        for fetcher in self.fetchers.values():
            for tp in tps:
                fetcher.remove(tp)
        self.shutdown_idle_fetchers()

    def shutdown_idle_fetchers(self) -> None:
        for source, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                del self.fetchers[source]
                task = asyncio.get_running_loop().create_task(fetcher.stop())
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)

    def fetch_state(self, tp: TopicPartition) -> tuple[SourceBroker, PartitionFetchState] | None:
        for source, fetcher in self.fetchers.items():
            st = fetcher.partitions.get(tp)
            if st is not None:
                return source, st
        return None

    def max_lag(self) -> int:
        """ReplicaFetcherManager MaxLag: the largest (leader HW - our LEO) we know of."""
        lag = 0
        for fetcher in self.fetchers.values():
            for tp in fetcher.partitions:
                p = self.rm.get_partition(tp)
                if p is not None and p.log is not None:
                    lag = max(lag, p.leader_hw_seen - p.log.log_end_offset)
        return lag

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        for f in fetchers:
            await f.stop()
        for t in list(self._stopping):
            with contextlib.suppress(asyncio.CancelledError):
                await t
