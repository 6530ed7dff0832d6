"""Topic name validation on the wire: Kafka's Topic.validate rules and the '.'/'_'
collision check, for CreateTopics and for Metadata auto-creation."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.topic_names import colliding_topic, validate_topic_name
from tests.server.raw_client import RawClient
from tests.server.test_protocol_edges import metadata


def create(client: RawClient, *names: str, validate_only: bool = False):
    req = CreateTopicsRequest(
        topics=tuple(
            CreatableTopic(
                name=n, num_partitions=1, replication_factor=1, assignments=(), configs=()
            )
            for n in names
        ),
        timeout=datetime.timedelta(seconds=10),
        validate_only=validate_only,
    )
    return {t.name: t for t in client.call(19, 7, req).topics}


@pytest.fixture
def client(kafka_bootstrap):
    c = RawClient.to(kafka_bootstrap)
    yield c
    c.close()


@pytest.mark.parametrize(
    "name",
    ["abc\n", "abc\r", "a b", "bad/name", "ünïcode", ".", "..", "", "x" * 250, "tab\there"],
)
def test_illegal_names_get_invalid_topic_exception_and_nothing_is_created(
    client, kafka_broker, name
):
    r = create(client, name)[name]
    assert r.error_code == ErrorCode.invalid_topic_exception
    assert r.error_message
    md = client.call(3, 12, metadata(name, auto=True))
    assert md.topics[0].error_code == ErrorCode.invalid_topic_exception
    assert name not in kafka_broker.kafka.metadata_cache.topics


def test_trailing_newline_is_not_legal():
    # regression: re.match(r"^...$") accepts "abc\n" because "$" matches before a final newline
    assert validate_topic_name("abc\n") is not None
    assert validate_topic_name("abc") is None


def test_longest_legal_name_is_249_characters(client, kafka_broker):
    name = "n" * 249
    assert create(client, name)[name].error_code == ErrorCode.none
    assert name in kafka_broker.kafka.metadata_cache.topics
    kafka_broker.call(kafka_broker.kafka.admin.delete_topics, [name], 10000)


def test_dots_and_underscores_that_collide_are_refused(client, kafka_broker):
    first = "collide.me_now"
    assert create(client, first)[first].error_code == ErrorCode.none
    try:
        for other in ("collide_me_now", "collide.me.now", "collide_me.now"):
            r = create(client, other)[other]
            assert r.error_code == ErrorCode.invalid_topic_exception, other
            assert r.error_message == f"Topic '{other}' collides with existing topic: {first}"
            # validate_only applies the same check
            r = create(client, other, validate_only=True)[other]
            assert r.error_code == ErrorCode.invalid_topic_exception
            # auto-creation through Metadata too, and nothing appears
            md = client.call(3, 12, metadata(other, auto=True))
            assert md.topics[0].error_code == ErrorCode.invalid_topic_exception
            assert other not in kafka_broker.kafka.metadata_cache.topics
        # the same name again is TOPIC_ALREADY_EXISTS (Kafka checks that first)
        assert create(client, first)[first].error_code == ErrorCode.topic_already_exists
        # a name with '-' instead does not collide
        assert create(client, "collide-me-now")["collide-me-now"].error_code == ErrorCode.none
    finally:
        kafka_broker.call(kafka_broker.kafka.admin.delete_topics, [first, "collide-me-now"], 10000)


def test_colliding_names_in_one_request_are_refused_after_the_first(client, kafka_broker):
    rs = create(client, "same.req_x", "same_req.x")
    try:
        assert rs["same.req_x"].error_code == ErrorCode.none
        assert rs["same_req.x"].error_code == ErrorCode.invalid_topic_exception
    finally:
        kafka_broker.call(kafka_broker.kafka.admin.delete_topics, ["same.req_x"], 10000)


def test_colliding_topic_helper():
    assert colliding_topic("a_b", ["a.b", "zzz"]) == "a.b"
    assert colliding_topic("a.b", ["a.b"]) is None  # itself: "already exists", not a collision
    assert colliding_topic("ab", ["ab"]) is None
    assert colliding_topic("a-b", ["a_b"]) is None
