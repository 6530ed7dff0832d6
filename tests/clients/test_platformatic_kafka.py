"""@platformatic/kafka 1.35.0 (Node.js, pure JS) end to end against the embedded broker.

One node process per module (:class:`tests.clients.node.NodeSession`). Codecs: none,
gzip, snappy and lz4 (the client's own, lz4/snappy in WebAssembly); zstd needs a
Node.js whose zlib has it (22.15+), and Debian's node here is 20, so it is not covered.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest

from kafkalite.protocol.record_batch import iter_headers
from tests.clients.node import NodeSession, b64, consumed, wait_for
from tests.clients.workload import CODEC_IDS, check_consumed, make_records

SETUP = """
const K = require('@platformatic/kafka')
ctx.K = K
ctx.opts = (clientId, extra = {}) => ({
  clientId, bootstrapBrokers: [BOOTSTRAP], retries: 8, retryDelay: 50, ...extra
})
ctx.admin = new K.Admin(ctx.opts('plt-admin'))
ctx.producer = (clientId, extra = {}) => new K.Producer(ctx.opts(clientId, extra))
// a group member collecting every message it gets, as plain JSON
ctx.collect = async (name, groupId, topics, opts = {}) => {
  const consumer = new K.Consumer(ctx.opts(name, {
    groupId, sessionTimeout: 6000, heartbeatInterval: 300, rebalanceTimeout: 6000,
    maxWaitTime: 100, ...opts.consumer
  }))
  const got = []
  const joins = []
  const errors = []
  consumer.on('consumer:group:join', e => joins.push(
    (e.assignments || []).map(a => ({ topic: a.topic, partitions: [...a.partitions] }))))
  const stream = await consumer.consume({
    topics, mode: 'committed', fallbackMode: 'earliest', autocommit: 100, ...opts.consume
  })
  stream.on('data', m => got.push({
    partition: m.partition, offset: Number(m.offset),
    key: m.key && m.key.length ? m.key.toString('base64') : null,
    value: m.value ? m.value.toString('base64') : null,
    headers: [...m.headers].map(([k, v]) => [k.toString(), v.toString('base64')]),
    timestamp: Number(m.timestamp)
  }))
  stream.on('error', e => errors.push(String(e)))
  ctx[name] = { consumer, stream, got, joins, errors }
  return null
}
"""


@pytest.fixture(scope="module")
def node(kafka_broker) -> Iterator[NodeSession]:
    s = NodeSession()
    try:
        s.run(SETUP.replace("BOOTSTRAP", json.dumps(kafka_broker.bootstrap_servers)))
        yield s
    finally:
        try:
            s.run("await ctx.admin.close()", timeout=10)
        finally:
            s.close()


def _values(rows: list[dict]) -> list[str]:
    return [base64.b64decode(r["value"]).decode() for r in rows]


def _stop(node: NodeSession, *names: str) -> None:
    node.run(
        f"""for (const n of {json.dumps(names)}) {{
          await ctx[n].stream.close(); await ctx[n].consumer.close()
          if (ctx[n].errors.length) throw new Error(n + ': ' + ctx[n].errors.join('; '))
        }}"""
    )


def _produce(node: NodeSession, topic: str, values: list[str], **opts) -> None:
    node.run(f"""
      const p = ctx.producer('plt-p', {json.dumps(opts)})
      await p.send({{ messages: {json.dumps(values)}.map(v => ({{ topic: '{topic}', key: Buffer.from('k' + v),
        value: Buffer.from(v) }})) }})
      await p.close()
    """)


def test_platformatic_admin_topics_configs_offsets_records(node, kafka_broker):
    topic = "plt-admin"
    r = node.run(f"""
      const a = ctx.admin, K = ctx.K, topic = {json.dumps(topic)}
      const created = await a.createTopics({{ topics: [topic], partitions: 2, replicas: 1,
        configs: [{{ name: 'cleanup.policy', value: 'delete' }}] }})
      let exists = null
      try {{ await a.createTopics({{ topics: [topic], partitions: 2, replicas: 1 }}) }}
      catch (e) {{ exists = e.errors ? e.errors.map(x => x.apiId || x.message) : [String(e)] }}
      await a.createPartitions({{ topics: [{{ name: topic, count: 3 }}] }})
      const md = await a.metadata({{ topics: [topic] }})
      await a.incrementalAlterConfigs({{ resources: [{{ resourceType: K.ConfigResourceTypes.TOPIC,
        resourceName: topic, configs: [{{ name: 'retention.ms', configOperation: 0, value: '3600000' }}] }}] }})
      await a.alterConfigs({{ resources: [{{ resourceType: K.ConfigResourceTypes.TOPIC, resourceName: topic,
        configs: [{{ name: 'retention.ms', value: '3600000' }}, {{ name: 'max.message.bytes', value: '2000000' }}] }}] }})
      const cfg = await a.describeConfigs({{ includeSynonyms: true, resources: [
        {{ resourceType: K.ConfigResourceTypes.TOPIC, resourceName: topic,
          configurationKeys: ['retention.ms', 'max.message.bytes', 'cleanup.policy'] }},
        {{ resourceType: K.ConfigResourceTypes.BROKER, resourceName: '0', configurationKeys: ['log.retention.hours'] }}] }})
      const p = ctx.producer('plt-admin-p')
      await p.send({{ messages: Array.from({{ length: 10 }}, (_, i) => ({{ topic, partition: 0,
        value: Buffer.from('v' + i), timestamp: 1700000000000n + BigInt(i) }})) }})
      await p.close()
      const deleted = await a.deleteRecords({{ topics: [{{ name: topic, partitions: [{{ partition: 0, offset: 4n }}] }}] }})
      const parts = [0, 1, 2]
      const lo = await a.listOffsets({{ topics: [{{ name: topic, partitions: parts.map(i => ({{ partitionIndex: i, timestamp: -2n }})) }}] }})
      const hi = await a.listOffsets({{ topics: [{{ name: topic, partitions: parts.map(i => ({{ partitionIndex: i, timestamp: -1n }})) }}] }})
      const byTs = await a.listOffsets({{ topics: [{{ name: topic, partitions: [{{ partitionIndex: 0, timestamp: 1700000000006n }}] }}] }})
      const groupId = 'plt-admin-group'
      await a.alterConsumerGroupOffsets({{ groupId, topics: [{{ name: topic,
        partitionOffsets: [{{ partition: 0, offset: 7n }}, {{ partition: 1, offset: 0n }}] }}] }})
      const committed = await a.listConsumerGroupOffsets({{ groups: [groupId] }})
      await a.deleteConsumerGroupOffsets({{ groupId, topics: [{{ name: topic, partitionIndexes: [1] }}] }})
      const after = await a.listConsumerGroupOffsets({{ groups: [groupId] }})
      const groups = await a.listGroups()
      await a.deleteGroups({{ groups: [groupId] }})
      const groupsAfter = await a.listGroups()
      const logDirs = await a.describeLogDirs({{ topics: [{{ name: topic, partitions: parts }}] }})
      await a.deleteTopics({{ topics: [topic] }})
      const listed = await a.listTopics()
      return {{ created, exists, md, cfg, deleted, lo, hi, byTs, committed, after,
        groups: [...groups.keys()], groupsAfter: [...groupsAfter.keys()], logDirs, listed }}
    """)
    assert r["created"][0]["name"] == topic and r["created"][0]["partitions"] == 2
    assert r["exists"]  # TOPIC_ALREADY_EXISTS surfaces as an error
    assert r["md"]["topics"][topic]["partitionsCount"] == 3
    topic_cfg, broker_cfg = r["cfg"]
    values = {c["name"]: c for c in topic_cfg["configs"]}
    assert values["retention.ms"]["value"] == "3600000"
    assert values["max.message.bytes"]["value"] == "2000000"
    assert values["cleanup.policy"]["value"] == "delete"
    assert [c["name"] for c in broker_cfg["configs"]] == ["log.retention.hours"]
    assert r["deleted"][0]["partitions"][0]["lowWatermark"] == "4"
    lo = {p["partitionIndex"]: p["offset"] for p in r["lo"][0]["partitions"]}
    hi = {p["partitionIndex"]: p["offset"] for p in r["hi"][0]["partitions"]}
    assert lo == {0: "4", 1: "0", 2: "0"} and hi == {0: "10", 1: "0", 2: "0"}
    assert r["byTs"][0]["partitions"][0]["offset"] == "6"

    def committed(groups: list[dict]) -> dict[int, str]:
        [g] = groups
        return {
            p["partitionIndex"]: p["committedOffset"] for t in g["topics"] for p in t["partitions"]
        }

    assert committed(r["committed"]) == {0: "7", 1: "0"}
    assert committed(r["after"]) == {0: "7"}
    assert "plt-admin-group" in r["groups"] and "plt-admin-group" not in r["groupsAfter"]
    [broker_dirs] = r["logDirs"]
    assert broker_dirs["results"][0]["topics"][0]["name"] == topic
    assert topic not in r["listed"]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_platformatic_produce_keys_headers_codecs_then_consume(node, kafka_broker, codec):
    topic = f"plt-codec-{codec}"
    kafka_broker.create_topic(topic, partitions=3)
    recs = make_records(codec, 1500)
    msgs = [
        {
            "key": b64(r.key),
            "value": b64(r.value),
            "headers": [[k, b64(v)] for k, v in r.headers],
            "timestamp": str(r.timestamp),
        }
        for r in recs
    ]
    node.run(f"""
      const p = ctx.producer('plt-producer-{codec}', {{ compression: '{codec}', acks: -1 }})
      const B = s => Buffer.from(s, 'base64')
      const messages = {json.dumps(msgs)}.map(m => ({{ topic: {json.dumps(topic)}, key: B(m.key), value: B(m.value),
        timestamp: BigInt(m.timestamp), headers: new Map(m.headers.map(([k, v]) => [Buffer.from(k), B(v)])) }}))
      for (let i = 0; i < messages.length; i += 500) await p.send({{ messages: messages.slice(i, i + 500) }})
      await p.close()
    """)
    seen = set()
    for part in range(3):
        plog = kafka_broker.kafka.replica_manager.get_partition((topic, part)).log
        data = plog.read(0, 1 << 30, max_offset=None).records
        raw = data if isinstance(data, bytes) else data.read_bytes()
        seen |= {h.compression for _, h in iter_headers(raw)}
    assert seen == {CODEC_IDS[codec]}
    name = f"plt_c_{codec}"
    node.run(f"await ctx.collect('{name}', 'plt-codec-group-{codec}', [{json.dumps(topic)}])")
    rows = node.run(
        f"return await ctx.until(() => ctx.{name}.got.length >= {len(recs)} && ctx.{name}.got, 30000)"
    )
    _stop(node, name)
    check_consumed(recs, consumed(rows), 3)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_platformatic_consumer_group_rebalance_commit_and_resume(node, kafka_broker, protocol):
    """Two members split four partitions, commit, and a later member resumes from
    the commits; with the classic protocol (JoinGroup/SyncGroup) and KIP-848's."""
    topic, group = f"plt-group-{protocol}", f"plt-group-{protocol}"
    kafka_broker.create_topic(topic, partitions=4)
    member = {"consumer": {"groupProtocol": protocol}} if protocol == "consumer" else {}
    _produce(node, topic, [f"a{i}" for i in range(40)])
    node.run(f"await ctx.collect('plt_g1', '{group}', ['{topic}'], {json.dumps(member)})")
    node.run("await ctx.until(() => ctx.plt_g1.got.length >= 40)")
    node.run(f"await ctx.collect('plt_g2', '{group}', ['{topic}'], {json.dumps(member)})")
    split = node.run("""
      const owned = n => { const a = ctx[n].consumer.assignments || []; return a.flatMap(x => x.partitions) }
      await ctx.until(() => owned('plt_g1').length === 2 && owned('plt_g2').length === 2, 20000, 'rebalance')
      // a fetch sent before the rebalance (100 ms long poll) may still be answered with
      // the revoked partitions' records: the client keeps them, as it would from Kafka
      await ctx.sleep(300)
      return [owned('plt_g1'), owned('plt_g2')]
    """)
    assert sorted(split[0] + split[1]) == [0, 1, 2, 3]
    _produce(node, topic, [f"b{i}" for i in range(40)])
    got = node.run("""
      const b = n => ctx[n].got.filter(m => Buffer.from(m.value, 'base64').toString()[0] === 'b')
      await ctx.until(() => new Set(b('plt_g1').concat(b('plt_g2')).map(m => m.value)).size >= 40)
      return [b('plt_g1'), b('plt_g2')]
    """)
    # every record once across the members (at least once is the contract across a
    # rebalance; with the group settled before producing, each comes once here)
    assert sorted(_values(got[0] + got[1])) == sorted(f"b{i}" for i in range(40))
    assert got[0] and got[1]
    _stop(node, "plt_g1", "plt_g2")
    r = node.run(f"""
      const d = await ctx.admin.describeGroups({{ groups: ['{group}'] }})
      const o = await ctx.admin.listConsumerGroupOffsets({{ groups: ['{group}'] }})
      return {{ d: [...d.values()], o }}
    """)
    if protocol == "classic":
        assert r["d"][0]["state"] == "EMPTY" and r["d"][0]["members"] == {}
    committed = {
        p["partitionIndex"]: int(p["committedOffset"])
        for t in r["o"][0]["topics"]
        for p in t["partitions"]
    }
    assert sum(committed.values()) == 80
    _produce(node, topic, [f"c{i}" for i in range(40)])
    node.run(f"await ctx.collect('plt_g3', '{group}', ['{topic}'], {json.dumps(member)})")
    rows = node.run(
        "await ctx.until(() => ctx.plt_g3.got.length >= 40); await ctx.sleep(200); return ctx.plt_g3.got"
    )
    _stop(node, "plt_g3")
    assert sorted(_values(rows)) == sorted(f"c{i}" for i in range(40))


def test_platformatic_idempotent_and_transactional_producers(node, kafka_broker, kafka_faults):
    topic = "plt-txn"
    kafka_broker.create_topic(topic, partitions=1)

    def for_topic(_ctx, req) -> bool:
        return any(getattr(t, "name", None) == topic for t in getattr(req, "topic_data", ()))

    not_leader = kafka_faults.error("Produce", "NOT_LEADER_OR_FOLLOWER", times=1, when=for_topic)
    lost = kafka_faults.drop(
        "Produce", after_handling=True, close_after_ms=50, times=1, when=for_topic
    )
    node.run(f"""
      const p = ctx.producer('plt-idem', {{ idempotent: true, acks: -1 }})
      for (let i = 0; i < 5; i++) await p.send({{ messages: [{{ topic: '{topic}', value: Buffer.from('idem-' + i) }}] }})
      await p.close()
    """)
    assert not_leader.hits == 1 and lost.hits == 1
    node.run(f"""
      const p = ctx.producer('plt-tx', {{ transactionalId: 'plt-tx-1', idempotent: true, acks: -1 }})
      let t = await p.beginTransaction()
      await t.send({{ messages: [0, 1].map(i => ({{ topic: '{topic}', value: Buffer.from('aborted-' + i) }})) }})
      await t.abort()
      t = await p.beginTransaction()
      await t.send({{ messages: [0, 1].map(i => ({{ topic: '{topic}', value: Buffer.from('committed-' + i) }})) }})
      await t.commit()
      await p.close()
    """)
    node.run(
        f"await ctx.collect('plt_rc', 'plt-tx-reader', ['{topic}'], {{ consume: {{ isolationLevel: 1 }} }})"
    )
    rows = node.run(
        "await ctx.until(() => ctx.plt_rc.got.length >= 7); await ctx.sleep(300); return ctx.plt_rc.got"
    )
    _stop(node, "plt_rc")
    assert _values(rows) == [f"idem-{i}" for i in range(5)] + ["committed-0", "committed-1"]


def test_platformatic_consumer_survives_dropped_fetch_errors_and_leader_epoch_bump(
    node, kafka_broker, kafka_faults
):
    topic = "plt-faults"
    kafka_broker.create_topic(topic, partitions=1)
    _produce(node, topic, [f"one-{i}" for i in range(10)])
    node.run(f"await ctx.collect('plt_f', 'plt-faults-group', ['{topic}'])")
    node.run("await ctx.until(() => ctx.plt_f.got.length >= 10)")
    dropped = kafka_faults.drop("Fetch", close_after_ms=200, client_id="plt_f", times=1)
    not_leader = kafka_faults.error("Fetch", "NOT_LEADER_OR_FOLLOWER", client_id="plt_f", times=2)
    wait_for(lambda: dropped.hits == 1 and not_leader.hits == 2)
    _produce(node, topic, [f"two-{i}" for i in range(10)])
    node.run("await ctx.until(() => ctx.plt_f.got.length >= 20)")
    kafka_faults.bump_leader_epoch(topic, 0)
    assert kafka_faults.sever_connections("plt_f") >= 1
    _produce(node, topic, [f"three-{i}" for i in range(10)])
    rows = node.run(
        "await ctx.until(() => ctx.plt_f.got.length >= 30); await ctx.sleep(300); return ctx.plt_f.got"
    )
    _stop(node, "plt_f")
    assert _values(rows) == [f"{t}-{i}" for t in ("one", "two", "three") for i in range(10)]


def test_platformatic_producer_follows_a_leader_move(node, kafka_cluster):
    """A real move to another broker (a reassignment through the controller): the same
    producer gets NOT_LEADER_OR_FOLLOWER from the old leader, refreshes metadata and
    sends to the new one; a group member then reads everything from the new leader.
    (A MessagesStream that is fetching during the move retries the old leader only
    and then fails, in 1.35, against Kafka too, so the consumer starts after it.)"""
    topic = "plt-move"
    kafka_cluster.create_topic(topic, assignments={0: [0]})
    brokers = {"bootstrapBrokers": kafka_cluster.bootstrap_servers.split(",")}
    send = f"""
      await ctx.mp.send({{ messages: Array.from({{ length: 10 }}, (_, i) => ({{ topic: '{topic}', partition: 0,
        value: Buffer.from(TAG + '-' + i) }})) }})
    """
    node.run(f"ctx.mp = ctx.producer('plt-move-p', {json.dumps(brokers)})")
    node.run(send.replace("TAG", "'before'"))
    kafka_cluster.move_leader(topic, 0, 2)
    assert kafka_cluster.leader_of(topic, 0) == 2
    node.run(send.replace("TAG", "'after'"))
    node.run("await ctx.mp.close()")
    node.run(
        f"await ctx.collect('plt_m', 'plt-move-group', ['{topic}'], {{ consumer: {json.dumps(brokers)} }})"
    )
    rows = node.run(
        "await ctx.until(() => ctx.plt_m.got.length >= 20); await ctx.sleep(200); return ctx.plt_m.got"
    )
    _stop(node, "plt_m")
    assert _values(rows) == [f"{t}-{i}" for t in ("before", "after") for i in range(10)]
    assert [r.value for r in kafka_cluster.records(topic, 0)] == [v.encode() for v in _values(rows)]
