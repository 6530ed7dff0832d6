"""The producer state lives with the log (``kafkalite.log.producer_state``), as in Kafka's
UnifiedLog; these names stay importable from here."""

from kafkalite.log.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
)

__all__ = ["NUM_BATCHES_TO_RETAIN", "BatchMetadata", "ProducerStateEntry", "ProducerStateManager"]
