"""The broker's :class:`SocketServer` from its config.

The network layer takes typed values (endpoints, bounds, quotas) and never
reads ``BrokerConfig``; this is where Kafka's property names become those
values, and where a bad value becomes a ``ConfigError`` naming its key.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from typing import Any

from kafkalite.network.connection_quotas import (
    ConnectionQuotas,
    parse_overrides,
    resolve_overrides,
)
from kafkalite.network.request_channel import RequestChannel
from kafkalite.network.request_queue import ConnectionLimits, RequestQueue
from kafkalite.network.socket_server import SocketServer
from kafkalite.server.config import BrokerConfig, ConfigError


def build_socket_server(
    config: BrokerConfig,
    channel: RequestChannel,
    *,
    ssl_context: ssl.SSLContext | None = None,
    sasl: Mapping[str, Callable[[], Any]] | None = None,
) -> SocketServer:
    listeners = config.listeners
    inter_broker = config.inter_broker_listener
    try:
        overrides = resolve_overrides(
            parse_overrides(str(config["max.connections.per.ip.overrides"] or ""))
        )
    except (OSError, ValueError) as e:
        raise ConfigError("max.connections.per.ip.overrides", str(e)) from None
    return SocketServer(
        listeners,
        channel,
        idle_ms=int(config["connections.max.idle.ms"]),
        ssl_context=ssl_context,
        sasl=sasl,
        limits=ConnectionLimits(
            max_inflight=int(config["kafkalite.connection.max.inflight.requests"]),
            max_queued_bytes=int(config["kafkalite.connection.max.queued.response.bytes"]),
        ),
        queue=RequestQueue(
            int(config["queued.max.requests"]), int(config["queued.max.request.bytes"])
        ),
        quotas=ConnectionQuotas(
            max_connections=int(config["max.connections"]),
            max_per_ip=int(config["max.connections.per.ip"]),
            per_ip_overrides=overrides,
            # as Kafka: protected only when clients have another listener to use
            protected_listener=str(inter_broker) if len(listeners) > 1 else None,
            listener_max={
                name: v["max.connections"]
                for name, v in config.listener_connection_limits.items()
                if "max.connections" in v
            },
            max_creation_rate=int(config["max.connection.creation.rate"]),
            listener_creation_rate={
                name: v["max.connection.creation.rate"]
                for name, v in config.listener_connection_limits.items()
                if "max.connection.creation.rate" in v
            },
            window_num=int(config["quota.window.num"]),
            window_size_s=int(config["quota.window.size.seconds"]),
        ),
    )
