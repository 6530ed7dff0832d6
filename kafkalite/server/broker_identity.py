"""Who a starting broker is: its usable log dirs, cluster id, broker id, registration.

Kafka's ``KafkaServer.startup`` steps before any service exists: the log dirs
are checked (a dir that cannot be created or whose meta.properties is
unreadable starts offline), the cluster id is read or created in the store,
the broker id comes from the config, meta.properties or the store's sequence
(``broker.id.generation.enable``), and meta.properties is written.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

from kafkalite.log.errors import KafkaStorageError
from kafkalite.log.meta_properties import (
    check_log_dirs,
    ensure_meta_properties,
    read_meta_properties,
    resolve_broker_id,
)
from kafkalite.metadata import zk_data
from kafkalite.metadata.kafka_zk_client import KafkaZkClient
from kafkalite.protocol.kafka_uuid import uuid_to_kafka
from kafkalite.server.config import BrokerConfig, Endpoint


class LogDirsUnusable(KafkaStorageError):
    """No log dir can be used; ``reasons`` holds one line per dir."""

    def __init__(self, reasons: dict[Path, str]) -> None:
        super().__init__("every log dir failed at start-up: " + "; ".join(reasons.values()))
        self.reasons = reasons


def usable_log_dirs(config: BrokerConfig) -> tuple[list[Path], dict[Path, str]]:
    """The log dirs to use and those offline from the start (with the reason);
    raises :class:`LogDirsUnusable` if none is usable."""
    dirs, offline = check_log_dirs(config.log_dirs)
    if not dirs:
        raise LogDirsUnusable(offline)
    return list(dirs), offline


async def resolve_identity(
    zk: KafkaZkClient, config: BrokerConfig, log_dirs: list[Path], offline: dict[Path, str]
) -> tuple[str, int]:
    """(cluster id, broker id), meta.properties written; a dir it cannot be written to
    joins ``offline``."""
    cluster_id = await zk.get_or_create_cluster_id(
        config["cluster.id"] or uuid_to_kafka(uuid.uuid4())
    )
    configured: int | None = config.broker_id
    if configured is not None and configured < 0:
        configured = None
        if all(read_meta_properties(d) is None for d in log_dirs):
            if not config["broker.id.generation.enable"]:
                raise ValueError("broker.id is not set and broker.id.generation.enable is false")
            seq = await zk.generate_broker_sequence_id()
            configured = seq + int(config["reserved.broker.max.id"])
    broker_id = resolve_broker_id(log_dirs, configured)
    ensure_meta_properties(
        log_dirs,
        broker_id,
        cluster_id,
        on_write_error=lambda d, e: offline.setdefault(d, str(e)),
    )
    return cluster_id, broker_id


def broker_registration(
    advertised: Sequence[Endpoint], timestamp_ms: int, rack: str | None
) -> zk_data.BrokerRegistration:
    """The JSON of /brokers/ids/<id>: the advertised listeners (resolved ports)."""
    return zk_data.BrokerRegistration(
        endpoints=tuple(
            zk_data.EndPoint(e.listener, e.host or None, e.port, e.security_protocol)
            for e in advertised
        ),
        timestamp=timestamp_ms,
        rack=rack,
    )
