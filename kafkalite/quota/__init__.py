"""Client quotas (Kafka's ``ClientQuotaManager`` family): windowed rates, the eight-level
entity precedence, throttle times, and the quota configs kept in the metadata store.

This package computes *how long* a client must wait; the server applies it
(``throttle_time_ms`` in the response, then the connection muted: KIP-219). It sits
beside ``replica``/``coordinator``/``controller`` (layer 4): it reads and writes
``/config/users`` and ``/config/clients`` through ``metadata`` and imports nothing
above it. See docs/quotas.md.
"""

from kafkalite.quota.entities import ANONYMOUS, DEFAULT, ClientQuotaConfigs, QuotaEntity
from kafkalite.quota.managers import (
    ClientQuotaManager,
    ControllerMutationQuotaManager,
    QuotaConfig,
    QuotaManagers,
)
from kafkalite.quota.rate import TokenBucket, WindowedRate

__all__ = [
    "ANONYMOUS",
    "DEFAULT",
    "ClientQuotaConfigs",
    "ClientQuotaManager",
    "ControllerMutationQuotaManager",
    "QuotaConfig",
    "QuotaEntity",
    "QuotaManagers",
    "TokenBucket",
    "WindowedRate",
]
