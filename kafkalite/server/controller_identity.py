"""Which controller requests a broker accepts: the live controller's, on its listener.

Kafka's ZooKeeper-mode broker served LeaderAndIsr (4), StopReplica (5) and
UpdateMetadata (6) to any sender holding CLUSTER_ACTION and adopted the highest
controller epoch it was sent. Without an authorizer that lets a client delete
partitions, rewrite what Metadata advertises, and poison the cached epoch so the
real controller is refused afterwards. A kafkalite broker accepts them only

- on the listener the controller connects to: ``control.plane.listener.name``
  (KIP-291) or else the inter-broker listener (CLUSTER_AUTHORIZATION_FAILED
  elsewhere, the code Kafka gives a sender that is not the cluster), and
- when the request's (controller id, controller epoch) is the pair the metadata
  store holds in /controller and /controller_epoch (STALE_CONTROLLER_EPOCH
  otherwise: the sender is not the current controller).

Before both, and first of all: the request must carry the HMAC of the cluster's
inter-broker secret over its body (:mod:`kafkalite.protocol.inter_broker.authenticator`),
CLUSTER_AUTHORIZATION_FAILED otherwise. On a shared listener a client can name the
live controller's id and epoch exactly; it cannot sign for them.

The pair last read from the store is cached, so the controller's own requests
cost no store read. The store is read again when a request names another pair (a
higher epoch may be a controller this broker has not heard of yet) or when this
broker's watch on /controller saw the controller change. Only what the store says
is ever cached, never a request's claim.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.kafka_zk_client import parse_controller_id
from kafkalite.metadata.store import MetadataStore, MetadataStoreError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.inter_broker.authenticator import AUTHENTICATOR_TAG, is_valid

log = logging.getLogger(__name__)

CLUSTER_AUTHORIZATION_FAILED = int(ErrorCode.cluster_authorization_failed)
STALE_CONTROLLER_EPOCH = int(ErrorCode.stale_controller_epoch)

#: LeaderAndIsr, StopReplica, UpdateMetadata: sent by the controller to brokers
FROM_CONTROLLER = frozenset({4, 5, 6})
#: ControlledShutdown: sent by a broker to the controller, on the inter-broker listener
CONTROLLED_SHUTDOWN = 7

#: a ZooKeeper server that lags the leader may not have a new epoch yet: read again
#: this many times, this far apart, before calling a higher epoch a forgery
LAG_RETRIES = 2
LAG_RETRY_S = 0.05
#: a store that does not answer (paused, partitioned) makes the request fail, not hang
STORE_READ_TIMEOUT_S = 5.0


@dataclass(slots=True)
class LiveController:
    """What /controller and /controller_epoch said when last read (-1: never read)."""

    id: int = -1
    epoch: int = -1


@dataclass(frozen=True, slots=True)
class Rejection:
    error_code: int
    reason: str


class ControllerRequestGate:
    """Admits controller requests by listener and by the store's live controller."""

    def __init__(
        self,
        *,
        control_plane_listener: str,
        inter_broker_listener: str,
        store: Callable[[], MetadataStore | None],
        watched_controller_id: Callable[[], int | None],
    ) -> None:
        self.control_plane_listener = control_plane_listener
        self.inter_broker_listener = inter_broker_listener
        self._store = store
        #: this broker's own view of /controller from its watch (None before it has one)
        self._watched_controller_id = watched_controller_id
        self.live = LiveController()
        #: set by authenticate_as() at start-up, before any listener accepts
        self._secret: bytes | None = None
        self._broker_id = -1

    def authenticate_as(self, broker_id: int, secret: bytes) -> None:
        """Check requests against this broker's id and the cluster's inter-broker secret."""
        self._broker_id = broker_id
        self._secret = secret

    def check_authenticator(
        self,
        api_key: int,
        api_version: int,
        presented: bytes | None,
        body: bytes | memoryview,
        flexible: bool,
    ) -> Rejection | None:
        """None if ``presented`` is the HMAC of this request for this broker."""
        if is_valid(self._secret, presented, api_key, api_version, self._broker_id, body):
            return None
        if not flexible:
            reason = f"v{api_version} is not flexible and cannot carry an authenticator"
        elif presented is None:
            reason = f"no authenticator (request header tag {AUTHENTICATOR_TAG})"
        elif self._secret is None:
            reason = "this broker has not read the inter-broker secret yet"
        else:
            reason = "the authenticator does not match the cluster's inter-broker secret"
        return Rejection(CLUSTER_AUTHORIZATION_FAILED, reason)

    def check_listener(self, api_key: int, listener: str) -> Rejection | None:
        if api_key == CONTROLLED_SHUTDOWN:
            allowed = {self.inter_broker_listener, self.control_plane_listener}
        elif api_key in FROM_CONTROLLER:
            allowed = {self.control_plane_listener}
        else:
            return None
        if listener in allowed:
            return None
        return Rejection(
            CLUSTER_AUTHORIZATION_FAILED,
            f"listener {listener} is not the {'/'.join(sorted(allowed))} listener",
        )

    async def check_controller(self, controller_id: int, controller_epoch: int) -> Rejection | None:
        """None if (controller_id, controller_epoch) is the live controller's."""
        live = self.live
        if controller_epoch < live.epoch:
            return Rejection(
                STALE_CONTROLLER_EPOCH,
                f"controller epoch {controller_epoch} is older than the live one ({live.epoch})",
            )
        if (controller_id, controller_epoch) == (live.id, live.epoch):
            watched = self._watched_controller_id()
            if watched is None or watched == live.id:
                return None
        for attempt in range(LAG_RETRIES + 1):
            try:
                async with asyncio.timeout(STORE_READ_TIMEOUT_S):
                    read = await self._read_store()
            except (MetadataStoreError, TimeoutError) as e:
                return Rejection(STALE_CONTROLLER_EPOCH, f"cannot read the live controller: {e!r}")
            if read is not None and read.epoch >= live.epoch:
                self.live = live = read  # only the store's word is cached, and only forward
            if read is None or read.epoch >= controller_epoch or attempt == LAG_RETRIES:
                break
            await asyncio.sleep(LAG_RETRY_S)
        if read is not None and (controller_id, controller_epoch) == (read.id, read.epoch):
            return None
        store = "no settled controller" if read is None else f"{read.id} at epoch {read.epoch}"
        return Rejection(
            STALE_CONTROLLER_EPOCH,
            f"controller {controller_id} at epoch {controller_epoch} is not the live "
            f"controller (the metadata store has {store})",
        )

    async def _read_store(self) -> LiveController | None:
        """The live (controller id, epoch); None when there is none or it is unsettled.

        A new controller creates /controller and then bumps /controller_epoch, so an
        epoch written before /controller was created (mzxid < czxid) belongs to an
        earlier controller: that pair is nobody's, and no request can match it.
        """
        store = self._store()
        if store is None:
            return None
        got = await store.get_or_none(zk_paths.CONTROLLER)
        if got is None:
            return None
        controller_id = parse_controller_id(got[0])
        epoch_got = await store.get_or_none(zk_paths.CONTROLLER_EPOCH)
        if controller_id < 0 or epoch_got is None or epoch_got[1].mzxid < got[1].czxid:
            return None
        try:
            epoch = zk_data.decode_controller_epoch(epoch_got[0])
        except (ValueError, zk_data.MetadataFormatError):
            return None
        return LiveController(controller_id, epoch)


def log_rejection(api: str, peer: object, listener: str, rejection: Rejection) -> None:
    """One line per refused request: what, from where, and why."""
    log.warning(
        "refused %s from %s on listener %s (error %d): %s",
        api,
        peer,
        listener,
        rejection.error_code,
        rejection.reason,
    )
