"""ZooKeeper-only behaviour: the test server, chroots, and surviving a server restart."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from metadata_helpers import Recorder, TcpProxy, wait_for

from kafkalite.metadata import (
    ConnectionLossError,
    SessionState,
    StoreClosedError,
    ZooKeeperStore,
)
from kafkalite.metadata.zookeeper import parse_connect_string
from kafkalite.testing.zookeeper import (
    ZOOKEEPER_JAR,
    ZooKeeperNotInstalledError,
    ZooKeeperServer,
    zookeeper_available,
)

needs_zookeeper = pytest.mark.skipif(not zookeeper_available(), reason="zookeeper not installed")


def test_parse_connect_string() -> None:
    assert parse_connect_string("h1:2181") == ("h1:2181", "")
    assert parse_connect_string("h1:2181,h2:2182/kafka") == ("h1:2181,h2:2182", "/kafka")
    assert parse_connect_string("h1:2181/a/b/") == ("h1:2181", "/a/b")
    assert parse_connect_string("h1:2181/") == ("h1:2181", "")
    for bad in ["", "/kafka", "h:1/a//b"]:
        with pytest.raises(ValueError):
            parse_connect_string(bad)


def test_server_answers_four_letter_words(zookeeper_server: ZooKeeperServer) -> None:
    assert zookeeper_server.running
    assert zookeeper_server.four_letter_word("ruok") == "imok"
    assert "Mode: standalone" in zookeeper_server.four_letter_word("srvr")
    assert zookeeper_server.classpath().split(":")[1] == str(ZOOKEEPER_JAR)


def test_missing_installation_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(ZooKeeperNotInstalledError, match="apt-get install zookeeper"):
        ZooKeeperServer().start()


async def test_chroot_is_created(zookeeper_server: ZooKeeperServer) -> None:
    chroot = f"/kafka-{uuid.uuid4().hex[:8]}/cluster"
    store = await ZooKeeperStore.open(zookeeper_server.connect_string + chroot)
    root = await ZooKeeperStore.open(zookeeper_server.connect_string)
    try:
        await store.create("/brokers/ids", b"x", makepath=True)
        assert (await root.get(f"{chroot}/brokers/ids"))[0] == b"x"
        rec = Recorder()
        await store.get_children("/brokers", watch=rec)
        await root.create(f"{chroot}/brokers/topics")
        events = await rec.wait(1)
        assert events[0].path == "/brokers"  # paths are reported without the chroot
        assert await store.get_children("/") == ["brokers"]
    finally:
        await store.close()
        await root.close()
    with pytest.raises(StoreClosedError):
        await store.exists("/")


async def test_connect_timeout_is_connection_loss() -> None:
    store = ZooKeeperStore("127.0.0.1:1")
    with pytest.raises(ConnectionLossError):
        await store.start(timeout=0.3)


async def test_short_partition_keeps_the_session(zookeeper_server: ZooKeeperServer) -> None:
    proxy = await TcpProxy("127.0.0.1", zookeeper_server.port).start()
    a = await ZooKeeperStore.open(proxy.address, session_timeout_ms=10_000)
    b = await ZooKeeperStore.open(zookeeper_server.connect_string)
    try:
        states = Recorder()
        a.add_state_listener(states)
        path = await a.create("/partition-", b"me", ephemeral=True, sequential=True)
        session = a.session_id
        await proxy.cut()
        await wait_for(lambda: SessionState.SUSPENDED in states.items)
        assert a.session_id is None
        changed = Recorder()
        await b.exists(path, watch=changed)
        await proxy.restore()
        await wait_for(lambda: states.items[-1:] == [SessionState.CONNECTED])
        assert states.items == [SessionState.SUSPENDED, SessionState.CONNECTED]
        assert a.session_id == session
        assert (await b.get(path))[0] == b"me"
        assert await a.set(path, b"still mine")
        await changed.wait(1)
    finally:
        await a.close()
        await b.close()
        await proxy.close()


@needs_zookeeper
async def test_session_survives_a_server_restart(tmp_path: Path) -> None:
    """ZooKeeper persists sessions: a restart within the timeout loses nothing.

    Clients go through a proxy that stays cut until the new server is ready:
    ZooKeeper 3.8 accepts connections before it serves them, and a client that
    connects in that window hangs for a whole connect timeout.
    """
    with ZooKeeperServer(work_dir=tmp_path) as server:
        proxy = await TcpProxy("127.0.0.1", server.port).start()
        a = await ZooKeeperStore.open(proxy.address, session_timeout_ms=20_000)
        b = await ZooKeeperStore.open(proxy.address, session_timeout_ms=20_000)
        try:
            states = Recorder()
            a.add_state_listener(states)
            await a.create("/eph", b"me", ephemeral=True)
            session = a.session_id
            await proxy.cut()
            server.stop()
            await wait_for(lambda: SessionState.SUSPENDED in states.items)
            server.start()
            await proxy.restore()
            await wait_for(lambda: states.items[-1:] == [SessionState.CONNECTED], timeout=15)
            assert SessionState.LOST not in states.items
            assert a.session_id == session
            assert (await b.get("/eph"))[0] == b"me"
        finally:
            await a.close()
            await b.close()
            await proxy.close()
