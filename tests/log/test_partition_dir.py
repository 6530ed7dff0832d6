"""Topic names become directory names: the log manager builds every partition path from a
legal name and refuses any path that is not directly inside a log dir, so ``..``, ``/``
or NUL in a name never reach mkdir, rename or rmtree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_manager import LogManager
from kafkalite.log.partition_dir import (
    UnsafeLogDir,
    direct_child,
    is_legal_topic_name,
    partition_dir,
)
from kafkalite.server.topic_names import validate_topic_name

HOSTILE = ["../x", "../../escape", "a/b", "/abs", "x\x00y", "..", ".", "", "t\n", "x" * 250]


def _tree(root: Path) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, n), root)
        for d, dirs, files in os.walk(root)
        for n in dirs + files
    }


def _manager(log_dir: Path) -> LogManager:
    lm = LogManager([log_dir], LogConfig(segment_bytes=400))
    lm.startup()
    return lm


@given(st.text(max_size=300))
def test_legal_topic_names_are_exactly_kafkas(name: str) -> None:
    assert is_legal_topic_name(name) == (validate_topic_name(name) is None)


@pytest.mark.parametrize("topic", HOSTILE)
def test_a_hostile_topic_name_never_reaches_the_filesystem(tmp_path: Path, topic: str) -> None:
    log_dir = tmp_path / "data" / "logs"
    lm = _manager(log_dir)
    before = _tree(tmp_path)
    with pytest.raises(UnsafeLogDir) as e:
        lm.get_or_create_log(topic, 0)
    assert e.value.error_code == 17  # INVALID_TOPIC_EXCEPTION
    assert _tree(tmp_path) == before
    assert lm.get_log(topic, 0) is None
    lm.shutdown()


def test_a_negative_partition_is_not_a_directory(tmp_path: Path) -> None:
    # "t--1" would load back as topic "t-", partition 1
    with pytest.raises(UnsafeLogDir):
        partition_dir(tmp_path, "t", -1)


@pytest.mark.parametrize("name", ["..", ".", "a/b", "x\x00y", "", "../t-0"])
def test_direct_child_refuses_anything_but_one_path_component(tmp_path: Path, name: str) -> None:
    with pytest.raises(UnsafeLogDir):
        direct_child(tmp_path, name)


def test_deleting_a_log_whose_directory_is_outside_the_log_dir_is_refused(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    lm = _manager(log_dir)
    lg = lm.get_or_create_log("t", 0)
    # a log whose directory is not a direct child (as an unchecked name would have made)
    outside = tmp_path / "outside-0"
    outside.mkdir()
    (outside / "precious").write_text("keep me")
    lg.dir = outside
    with pytest.raises(UnsafeLogDir):
        lm.delete_log("t", 0)
    assert (outside / "precious").read_text() == "keep me"
    assert lm.get_log("t", 0) is lg  # nothing was forgotten either
    lg.dir = log_dir / "t-0"
    lm.shutdown()


def test_start_up_ignores_directories_whose_topic_is_illegal(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    lm = _manager(log_dir)
    lm.get_or_create_log("good", 0)
    lm.shutdown()
    (log_dir / "bad name-0").mkdir()
    (log_dir / "..-3").mkdir()
    lm = _manager(log_dir)
    assert {lg.topic_partition for lg in lm.all_logs()} == {("good", 0)}
    assert (log_dir / "bad name-0").is_dir()  # left alone, not deleted
    lm.shutdown()
