"""The service: read ``input_topic``, transform, write ``output_topic``, then commit.

Offsets are committed only after the output is acknowledged, so a crash replays
(at-least-once) instead of losing events. Records that are not JSON objects go to
``<output_topic>.dlq`` untouched, with the reason in a header.
"""

from __future__ import annotations

import json

from confluent_kafka import Consumer, KafkaException, Producer


class InvalidEvent(ValueError):
    pass


def transform(value: bytes) -> bytes:
    """``{"text": "hi", ...}`` -> ``{"text": "HI", ..., "shouted": true}``."""
    try:
        event = json.loads(value)
    except ValueError as e:
        raise InvalidEvent(f"not JSON: {e}") from None
    if not isinstance(event, dict) or not isinstance(event.get("text"), str):
        raise InvalidEvent('expected an object with a string "text" field')
    event["text"] = event["text"].upper()
    event["shouted"] = True
    return json.dumps(event, separators=(",", ":")).encode()


class Shouter:
    def __init__(
        self,
        bootstrap_servers: str,
        input_topic: str,
        output_topic: str,
        *,
        group_id: str = "shouter",
        extra_config: dict[str, object] | None = None,
    ) -> None:
        common = {"bootstrap.servers": bootstrap_servers, **(extra_config or {})}
        self.output_topic = output_topic
        self.dlq_topic = f"{output_topic}.dlq"
        self.consumer = Consumer(
            {
                **common,
                "group.id": group_id,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.producer = Producer({**common, "enable.idempotence": True, "linger.ms": 5})
        self.consumer.subscribe([input_topic])

    def run_once(self, timeout: float = 1.0, max_records: int = 500) -> int:
        """Process what arrives within ``timeout``; returns how many records were handled."""
        records = self.consumer.consume(max_records, timeout)
        handled = 0
        for msg in records:
            if msg.error() is not None:
                raise KafkaException(msg.error())
            try:
                self.producer.produce(self.output_topic, transform(msg.value()), key=msg.key())
            except InvalidEvent as e:
                self.producer.produce(
                    self.dlq_topic, msg.value(), key=msg.key(), headers={"error": str(e)}
                )
            handled += 1
        if records:
            if self.producer.flush(30) != 0:
                raise RuntimeError("output not acknowledged; not committing")
            self.consumer.commit(asynchronous=False)
        return handled

    def close(self) -> None:
        self.producer.flush(10)
        self.consumer.close()
