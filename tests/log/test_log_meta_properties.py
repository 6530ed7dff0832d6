"""meta.properties rules (seed 000 behaviours 55-57)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.log.errors import InconsistentBrokerIdError, InconsistentClusterIdError
from kafkalite.log.meta_properties import (
    MetaProperties,
    ensure_meta_properties,
    parse_properties,
    read_meta_properties,
    resolve_broker_id,
    write_meta_properties,
)


def _dirs(tmp_path: Path, n: int = 2) -> list[Path]:
    out = [tmp_path / f"d{i}" for i in range(n)]
    for d in out:
        d.mkdir()
    return out


def test_first_start_writes_every_dir(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    bid = resolve_broker_id(dirs, None, generate=lambda: 1001)
    assert bid == 1001
    ensure_meta_properties(dirs, bid, "abcDEF123-_")
    for d in dirs:
        meta = read_meta_properties(d)
        assert meta == MetaProperties(1001, "abcDEF123-_", 0)
        text = (d / "meta.properties").read_text()
        assert "version=0\n" in text and "broker.id=1001\n" in text and text.startswith("#\n#")
        assert not (d / "meta.properties.tmp").exists()


def test_no_configured_id_uses_stored(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    write_meta_properties(dirs[0], MetaProperties(7))
    assert resolve_broker_id(dirs, None) == 7
    assert resolve_broker_id(dirs, -1) == 7
    ensure_meta_properties(dirs, 7)
    assert read_meta_properties(dirs[1]) == MetaProperties(7, None, 0)


def test_configured_id_must_match_stored(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    write_meta_properties(dirs[0], MetaProperties(7))
    assert resolve_broker_id(dirs, 7) == 7
    with pytest.raises(InconsistentBrokerIdError, match="doesn't match stored broker.id 7"):
        resolve_broker_id(dirs, 8)


def test_dirs_must_agree(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    write_meta_properties(dirs[0], MetaProperties(1))
    write_meta_properties(dirs[1], MetaProperties(2))
    with pytest.raises(InconsistentBrokerIdError, match="across log.dirs"):
        resolve_broker_id(dirs, None)
    with pytest.raises(InconsistentBrokerIdError):
        resolve_broker_id(dirs, 1)


def test_nothing_anywhere_needs_a_supplied_id(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    assert resolve_broker_id(dirs, 5) == 5
    with pytest.raises(InconsistentBrokerIdError):
        resolve_broker_id(dirs, None)


def test_cluster_id_rules(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    write_meta_properties(dirs[0], MetaProperties(1, "c1"))
    with pytest.raises(InconsistentClusterIdError):
        ensure_meta_properties(dirs, 1, "c2")
    ensure_meta_properties(dirs, 1)
    assert read_meta_properties(dirs[1]) == MetaProperties(1, "c1", 0)
    write_meta_properties(dirs[1], MetaProperties(1, "c9"))
    with pytest.raises(InconsistentClusterIdError):
        ensure_meta_properties(dirs, 1)


def test_reads_kafka_written_file(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text(
        "#\n#Thu Jan 01 00:00:00 UTC 2025\ncluster.id=Yq1Sh9rTjunx2NwGaxUAQw\nversion=0\nbroker.id=0\n"
    )
    assert read_meta_properties(tmp_path) == MetaProperties(0, "Yq1Sh9rTjunx2NwGaxUAQw", 0)
    assert read_meta_properties(tmp_path / "nope") is None


def test_properties_syntax() -> None:
    text = "! comment\n  a = 1\nb:2\nc 3\nd=x\\=y\\:z\nlong=one\\\n    two\ne\n"
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "x=y:z",
        "long": "onetwo",
        "e": "",
    }
