"""The ZooKeeper-like metadata store: one API, an embedded and a ZooKeeper backend.

See :mod:`kafkalite.metadata.store` for the API, :mod:`.zk_paths` for Kafka's znode
layout, :mod:`.zk_data` for the JSON stored there, and :func:`open_store` to pick a
backend from broker config.
"""

from kafkalite.metadata.embedded_store import EmbeddedEnsemble, EmbeddedStore
from kafkalite.metadata.factory import open_store
from kafkalite.metadata.store import (
    ANY_VERSION,
    BadVersionError,
    CheckOp,
    ConnectionLossError,
    CreateOp,
    DeleteOp,
    EventType,
    MetadataStore,
    MetadataStoreError,
    MultiResult,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    SessionExpiredError,
    SessionState,
    SetDataOp,
    Stat,
    StateListener,
    StoreClosedError,
    WatchCallback,
    WatchedEvent,
)
from kafkalite.metadata.zookeeper import ZooKeeperStore

__all__ = [
    "ANY_VERSION",
    "BadVersionError",
    "CheckOp",
    "ConnectionLossError",
    "CreateOp",
    "DeleteOp",
    "EmbeddedEnsemble",
    "EmbeddedStore",
    "EventType",
    "MetadataStore",
    "MetadataStoreError",
    "MultiResult",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Op",
    "SessionExpiredError",
    "SessionState",
    "SetDataOp",
    "Stat",
    "StateListener",
    "StoreClosedError",
    "WatchCallback",
    "WatchedEvent",
    "ZooKeeperStore",
    "open_store",
]
