"""The shutting-down broker's side of controlled shutdown (seed 000 §4, seed 002 §9).

Before it stops, a broker asks the controller (found in /controller, reached on
its inter-broker listener) to move leadership off it: ControlledShutdown
(api key 7) with its id and broker epoch, signed for the controller with the
cluster's inter-broker secret (the controller refuses it otherwise). Success is
error 0 with no remaining partitions. Otherwise it retries
``controlled.shutdown.max.retries`` times, ``controlled.shutdown.retry.backoff.ms``
apart, and then shuts down anyway, as Kafka does.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl

from kafkalite.common import structs
from kafkalite.controller.channel_manager import inter_broker_endpoint, is_sasl, is_tls
from kafkalite.metadata.kafka_zk_client import KafkaZkClient
from kafkalite.metadata.store import MetadataStore, MetadataStoreError, SessionState
from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol import sasl_client
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.sasl_client import SaslClientCredentials

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_VERSION = 3
_correlation = itertools.count(1)


class ControlledShutdownError(Exception):
    """One attempt failed (no controller, unreachable, an error code, partitions left)."""


async def send_controlled_shutdown(
    store: MetadataStore,
    broker_id: int,
    broker_epoch: int,
    *,
    listener_name: str | None,
    request_timeout_ms: int,
    ssl_context: ssl.SSLContext | None = None,
    secret: bytes | None = None,
    sasl: SaslClientCredentials | None = None,
) -> ib.ControlledShutdownResponse:
    """One ControlledShutdown round trip to the current controller."""
    zk = KafkaZkClient(store)
    controller_id = await zk.get_controller_id()
    if controller_id < 0:
        raise ControlledShutdownError("no controller is elected")
    info = (await zk.get_brokers([controller_id])).get(controller_id)
    if info is None:
        raise ControlledShutdownError(f"controller {controller_id} is not registered")
    ep = inter_broker_endpoint(info, listener_name)
    if ep is None:
        raise ControlledShutdownError(f"controller {controller_id} registered no endpoint")
    host, port = ep.host or "", ep.port
    tls = None
    if is_tls(ep):
        # the broker's client context presents its keystore (ssl.client.auth=required)
        tls = ssl_context if ssl_context is not None else ssl.create_default_context()
    correlation_id = next(_correlation) & 0x7FFFFFFF
    request = ib.ControlledShutdownRequest(broker_id, broker_epoch)
    async with asyncio.timeout(request_timeout_ms / 1000):
        reader, writer = await sasl_client.open_connection(
            host, port, ssl=tls, sasl=sasl if is_sasl(ep) else None
        )
        try:
            writer.write(
                ib.request_frame(
                    ib.CONTROLLED_SHUTDOWN,
                    CONTROLLED_SHUTDOWN_VERSION,
                    correlation_id,
                    str(broker_id),
                    request,
                    secret=secret,
                    target_broker_id=controller_id,
                )
            )
            await writer.drain()
            (size,) = structs.I32.unpack(await reader.readexactly(4))
            got, response = ib.parse_response_frame(
                ib.CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN_VERSION, await reader.readexactly(size)
            )
        finally:
            writer.close()
    if got != correlation_id:
        raise ControlledShutdownError(f"correlation id {got}, expected {correlation_id}")
    assert isinstance(response, ib.ControlledShutdownResponse)
    return response


async def controlled_shutdown(
    store: MetadataStore,
    broker_id: int,
    broker_epoch: int,
    *,
    listener_name: str | None,
    max_retries: int,
    retry_backoff_ms: int,
    request_timeout_ms: int,
    ssl_context: ssl.SSLContext | None = None,
    secret: bytes | None = None,
    sasl: SaslClientCredentials | None = None,
) -> bool:
    """Ask the controller until it has moved every leadership off this broker; False if
    it never did within ``max_retries`` attempts (the broker then stops anyway).

    Skipped without a live metadata session: the broker is then no longer
    registered, and no controller would act on its request.
    """
    if store.state is not SessionState.CONNECTED or store.session_id is None:
        log.warning("broker %d: no metadata session; skipping controlled shutdown", broker_id)
        return False
    for attempt in range(1, max(1, max_retries) + 1):
        try:
            resp = await send_controlled_shutdown(
                store,
                broker_id,
                broker_epoch,
                listener_name=listener_name,
                request_timeout_ms=request_timeout_ms,
                ssl_context=ssl_context,
                secret=secret,
                sasl=sasl,
            )
            if resp.error_code == ErrorCode.none and not resp.remaining_partitions:
                log.info("broker %d: controlled shutdown succeeded", broker_id)
                return True
            if resp.error_code:
                raise ControlledShutdownError(f"the controller answered error {resp.error_code}")
            remaining = [f"{p.topic_name}-{p.partition_index}" for p in resp.remaining_partitions]
            raise ControlledShutdownError(f"partitions still led here: {', '.join(remaining)}")
        except (
            ControlledShutdownError,
            MetadataStoreError,
            OSError,
            EOFError,
            TimeoutError,
            asyncio.IncompleteReadError,
            ib.InterBrokerCodecError,
        ) as e:
            log.warning(
                "broker %d: controlled shutdown attempt %d of %d failed: %s",
                broker_id,
                attempt,
                max_retries,
                e,
            )
        if attempt < max_retries:
            await asyncio.sleep(retry_backoff_ms / 1000)
    log.warning(
        "broker %d: proceeding to do an unclean shutdown as all the controlled shutdown "
        "attempts failed",
        broker_id,
    )
    return False
