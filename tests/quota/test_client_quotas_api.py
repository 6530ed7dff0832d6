"""DescribeClientQuotas (48) / AlterClientQuotas (49): storage in /config/users and
/config/clients, filters, validation, Kafka's eight-level precedence, and changes
applied on every broker of a cluster without a restart."""

from __future__ import annotations

import asyncio
import json

import pytest

from kafkalite.quota import ANONYMOUS
from kafkalite.testing import AsyncBroker
from kafkalite.testing.in_process_cluster import AsyncCluster
from tests.coordinator.wire import Wire
from tests.quota.quota_wire import alter, describe, entries

INVALID_REQUEST = 42
EXACT, DEFAULT, ANY = 0, 1, 2


async def test_alter_is_stored_as_kafka_zookeeper_mode_and_described(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        w = await Wire.connect(b.bootstrap_servers)
        try:
            r = await alter(w, {"client-id": "greedy"}, {"producer_byte_rate": 1048576})
            assert (r.error_code, r.error_message) == (0, None)
            r = await alter(
                w,
                {"user": "alice", "client-id": None},
                {"consumer_byte_rate": 2048, "request_percentage": 25.5},
            )
            assert r.error_code == 0
            r = await alter(w, {"user": None}, {"controller_mutation_rate": 10})
            assert r.error_code == 0

            store = b.broker.store
            raw, _ = await store.get("/config/clients/greedy")
            assert json.loads(raw) == {"version": 1, "config": {"producer_byte_rate": "1048576"}}
            raw, _ = await store.get("/config/users/alice/clients/<default>")
            assert json.loads(raw)["config"] == {
                "consumer_byte_rate": "2048",
                "request_percentage": "25.5",
            }
            raw, _ = await store.get("/config/users/<default>")
            assert json.loads(raw)["config"] == {"controller_mutation_rate": "10.0"}
            changes = await store.get_children("/config/changes")
            paths = [
                json.loads((await store.get(f"/config/changes/{c}"))[0])["entity_path"]
                for c in changes
            ]
            assert "clients/greedy" in paths and "users/alice/clients/<default>" in paths

            everything = entries(await describe(w, []))
            assert everything == {
                (("client-id", "greedy"),): {"producer_byte_rate": 1048576.0},
                (("user", "alice"), ("client-id", None)): {
                    "consumer_byte_rate": 2048.0,
                    "request_percentage": 25.5,
                },
                (("user", None),): {"controller_mutation_rate": 10.0},
            }
            # filters: exact / default / any, strict or not
            assert list(entries(await describe(w, [("client-id", EXACT, "greedy")]))) == [
                (("client-id", "greedy"),)
            ]
            assert list(entries(await describe(w, [("client-id", DEFAULT, None)]))) == [
                (("user", "alice"), ("client-id", None))
            ]
            assert entries(await describe(w, [("client-id", DEFAULT, None)], strict=True)) == {}
            assert set(entries(await describe(w, [("user", ANY, None)]))) == {
                (("user", "alice"), ("client-id", None)),
                (("user", None),),
            }
            assert list(entries(await describe(w, [("user", ANY, None)], strict=True))) == [
                (("user", None),)
            ]
            # removing the last key removes the entity from the listing
            r = await alter(w, {"client-id": "greedy"}, remove=["producer_byte_rate"])
            assert r.error_code == 0
            assert (("client-id", "greedy"),) not in entries(await describe(w, []))
            # validate_only changes nothing
            r = await alter(w, {"client-id": "x"}, {"producer_byte_rate": 5}, validate_only=True)
            assert r.error_code == 0
            assert (("client-id", "x"),) not in entries(await describe(w, []))
        finally:
            await w.close()


@pytest.mark.parametrize(
    ("entity", "ops", "fragment"),
    [
        ({"client-id": "c"}, {"producer_byte_rate": 1.5}, "must be a Long"),
        ({"client-id": "c"}, {"no_such_quota": 1}, "Invalid configuration key"),
        ({"client-id": "c"}, {"consumer_byte_rate": -1}, "greater than 0"),
        ({"ip": "1.2.3.4"}, {"producer_byte_rate": 1}, "Invalid configuration key"),
        ({"ip": "1.2.3.4"}, {"connection_creation_rate": 1.5}, "Integer"),
        ({"ip": "not-an-ip"}, {"connection_creation_rate": 1}, "not a valid IP"),
        ({"ip": "1.2.3.4", "user": "u"}, {"connection_creation_rate": 1}, "combination"),
        ({"client-id": "c"}, {"connection_creation_rate": 1}, "Invalid configuration key"),
        ({}, {"producer_byte_rate": 1}, "empty"),
    ],
)
async def test_alter_refuses_what_kafka_refuses(tmp_path, entity, ops, fragment):
    async with AsyncBroker(tmp_path) as b:
        w = await Wire.connect(b.bootstrap_servers)
        try:
            r = await alter(w, entity, ops)
            assert r.error_code == INVALID_REQUEST
            assert fragment in r.error_message
            assert entries(await describe(w, [])) == {}
        finally:
            await w.close()


async def test_describe_refuses_a_duplicate_or_unknown_entity_type(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        w = await Wire.connect(b.bootstrap_servers)
        try:
            r = await describe(w, [("user", ANY, None), ("user", DEFAULT, None)])
            assert r.error_code == INVALID_REQUEST and r.entries is None
            r = await describe(w, [("ip", ANY, None), ("user", ANY, None)])
            assert r.error_code == INVALID_REQUEST
            r = await describe(w, [("host", ANY, None)])
            assert r.error_code == INVALID_REQUEST
        finally:
            await w.close()


# The eight levels for user ANONYMOUS and client id "app", most specific first
# (docs/quotas.md): each row sets the quota at its level and at every less specific
# one, and the broker must apply the row's level.
LEVELS = [
    {"user": ANONYMOUS, "client-id": "app"},
    {"user": ANONYMOUS, "client-id": None},
    {"user": ANONYMOUS},
    {"user": None, "client-id": "app"},
    {"user": None, "client-id": None},
    {"user": None},
    {"client-id": "app"},
    {"client-id": None},
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
async def test_eight_level_precedence(tmp_path, level):
    async with AsyncBroker(tmp_path) as b:
        w = await Wire.connect(b.bootstrap_servers)
        try:
            for i in range(level, len(LEVELS)):
                r = await alter(w, LEVELS[i], {"producer_byte_rate": 1000 * (i + 1)})
                assert r.error_code == 0
            # another user's / client's levels never apply
            await alter(w, {"user": "bob", "client-id": "app"}, {"producer_byte_rate": 7})
            await alter(w, {"client-id": "other"}, {"producer_byte_rate": 9})
            listed = entries(await describe(w, []))
            assert len(listed) == len(LEVELS) - level + 2
            configs = b.broker.quotas.configs
            value, tags = configs.resolve(ANONYMOUS, "app", "producer_byte_rate")
            assert value == 1000 * (level + 1)
            # who shares the quota: (user, client) levels per both, user levels per
            # user, client-id levels per client id (Kafka's metric tags)
            expected_tags = {
                0: (ANONYMOUS, "app"),
                1: (ANONYMOUS, "app"),
                2: (ANONYMOUS, ""),
                3: (ANONYMOUS, "app"),
                4: (ANONYMOUS, "app"),
                5: (ANONYMOUS, ""),
                6: ("", "app"),
                7: ("", "app"),
            }[level]
            assert tags == expected_tags
            # a key set nowhere has no quota
            assert configs.resolve(ANONYMOUS, "app", "consumer_byte_rate")[0] is None
        finally:
            await w.close()


async def test_quotas_apply_on_every_broker_within_a_second_and_survive_restart(tmp_path):
    async with AsyncCluster(2, tmp_path) as c:
        first, second = c.nodes[0], c.nodes[1]
        w = await Wire.connect(first.bootstrap_servers)
        try:
            r = await alter(w, {"client-id": "spread"}, {"producer_byte_rate": 4096})
            assert r.error_code == 0
        finally:
            await w.close()
        configs = second.broker.quotas.configs
        deadline = asyncio.get_running_loop().time() + 1.0
        while configs.resolve(ANONYMOUS, "spread", "producer_byte_rate")[0] != 4096:
            assert asyncio.get_running_loop().time() < deadline, "not applied within 1 s"
            await asyncio.sleep(0.02)
        w2 = await Wire.connect(second.bootstrap_servers)
        try:
            listed = entries(await describe(w2, [("client-id", EXACT, "spread")]))
            assert listed == {(("client-id", "spread"),): {"producer_byte_rate": 4096.0}}
            # and a removal made on the second broker reaches the first
            await alter(w2, {"client-id": "spread"}, remove=["producer_byte_rate"])
        finally:
            await w2.close()
        configs = first.broker.quotas.configs
        deadline = asyncio.get_running_loop().time() + 1.0
        while configs.resolve(ANONYMOUS, "spread", "producer_byte_rate")[0] is not None:
            assert asyncio.get_running_loop().time() < deadline, "removal not applied within 1 s"
            await asyncio.sleep(0.02)


async def test_quotas_survive_a_restart(tmp_path):
    b = AsyncBroker(tmp_path)
    await b.start()
    try:
        w = await Wire.connect(b.bootstrap_servers)
        try:
            r = await alter(w, {"user": ANONYMOUS}, {"request_percentage": 42})
            assert r.error_code == 0
        finally:
            await w.close()
        await b.restart()
        assert b.broker.quotas.configs.resolve(ANONYMOUS, "any", "request_percentage")[0] == 42
        assert b.broker.quotas.request.enabled
    finally:
        await b.stop()


async def test_ip_entities_are_stored_in_config_ips_and_described(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        w = await Wire.connect(b.bootstrap_servers)
        try:
            assert (
                await alter(w, {"ip": "10.0.0.1"}, {"connection_creation_rate": 5})
            ).error_code == 0
            assert (await alter(w, {"ip": None}, {"connection_creation_rate": 50})).error_code == 0
            await alter(w, {"client-id": "c"}, {"producer_byte_rate": 1})
            raw, _ = await b.broker.store.get("/config/ips/10.0.0.1")
            assert json.loads(raw)["config"] == {"connection_creation_rate": "5"}
            assert entries(await describe(w, [("ip", ANY, None)])) == {
                (("ip", "10.0.0.1"),): {"connection_creation_rate": 5.0},
                (("ip", None),): {"connection_creation_rate": 50.0},
            }
            assert list(entries(await describe(w, [("ip", DEFAULT, None)]))) == [(("ip", None),)]
            assert len(entries(await describe(w, []))) == 3  # not strict: every entity
            configs = b.broker.quotas.configs
            assert configs.ip_rate("10.0.0.1") == 5 and configs.ip_rate("10.9.9.9") == 50
            await alter(w, {"ip": "10.0.0.1"}, remove=["connection_creation_rate"])
            assert configs.ip_rate("10.0.0.1") == 50
            assert list(entries(await describe(w, [("ip", EXACT, "10.0.0.1")]))) == []
        finally:
            await w.close()
