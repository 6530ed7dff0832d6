"""``kafkalite dump-log``: Kafka's DumpLogSegments output for .log, .index, .timeindex, .txnindex."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalite.cli import dump_log
from kafkalite.log.fetch_data import AbortedTxn
from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_manager import LogManager
from kafkalite.protocol.record_batch import compute_crc, parse_header
from kafkalite.protocol.records import build_batch, build_control_batch

TS = 1_700_000_000_000


@pytest.fixture
def seg_dir(tmp_path: Path) -> Path:
    """A closed log with plain, compressed, keyed/unkeyed, tombstone, idempotent and control batches."""
    cfg = LogConfig.from_properties({"segment.bytes": 1500, "index.interval.bytes": 100})
    lm = LogManager([tmp_path], cfg, clock_ms=lambda: TS)
    lm.startup()
    lg = lm.get_or_create_log("t", 0)
    batches = [
        build_batch([(b"key", b"hello", [("h1", b"x"), ("h2", None)], TS)]),
        build_batch([(None, b"no key", [], TS + 1), (b"k2", None, [], TS + 2)], compression=1),
        build_batch(
            [(b"p", b"idem", [], TS + 3)] * 3,
            producer_id=7,
            producer_epoch=2,
            base_sequence=10,
        ),
        build_control_batch(1, 5, producer_id=7, producer_epoch=2, timestamp=TS + 4),
    ]
    for b in batches:
        lg.append_as_leader(bytearray(b), 3)
    for i in range(30):
        lg.append_as_leader(
            bytearray(build_batch([(b"k%d" % i, b"v" * 30, [], TS + 10 + i)], compression=i % 5)), 3
        )
    lg.segments[0].txn_index.append(AbortedTxn(7, 4, 6, 7))
    lm.shutdown()
    return tmp_path / "t-0"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    rc = dump_log.main(list(argv))
    return rc, capsys.readouterr().out.splitlines()


def test_log_batches_and_records_in_kafkas_shape(
    seg_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = seg_dir / "00000000000000000000.log"
    rc, out = _run(capsys, str(f), "--print-data-log")
    assert rc == 0
    assert out[0] == f"Dumping {f}"
    assert out[1] == "Log starting offset: 0"
    data = f.read_bytes()
    h = parse_header(data, 0)
    assert h.crc == compute_crc(data, 0, h.size)
    assert out[2] == (
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1"
        " producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false isControl: false"
        f" deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: {TS} size: {h.size}"
        f" magic: 2 compresscodec: none crc: {h.crc} isvalid: true"
    )
    assert out[3] == (
        f"| offset: 0 CreateTime: {TS} keySize: 3 valueSize: 5 sequence: -1"
        " headerKeys: [h1,h2] key: key payload: hello"
    )
    assert "compresscodec: gzip" in out[4] and "count: 2" in out[4]
    assert out[5].endswith("keySize: -1 valueSize: 6 sequence: -1 headerKeys: [] payload: no key")
    assert (
        out[6]
        == f"| offset: 2 CreateTime: {TS + 2} keySize: 2 valueSize: -1 sequence: -1 headerKeys: [] key: k2"
    )
    assert out[7].startswith(
        "baseOffset: 3 lastOffset: 5 count: 3 baseSequence: 10 lastSequence: 12 producerId: 7 producerEpoch: 2"
    )
    assert [line.split(" sequence: ")[1].split()[0] for line in out[8:11]] == ["10", "11", "12"]
    assert "isTransactional: true isControl: true" in out[11]
    assert out[12].endswith("endTxnMarker: COMMIT coordinatorEpoch: 5")
    codecs = re.findall(r"compresscodec: (\w+)", "\n".join(out))
    assert {"none", "gzip", "snappy", "lz4", "zstd"} <= set(codecs)


def test_without_print_data_log_only_batches(
    seg_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = _run(capsys, str(seg_dir / "00000000000000000000.log"))
    assert rc == 0
    assert all(line.startswith(("Dumping", "Log starting offset", "baseOffset:")) for line in out)
    _rc, deep = _run(capsys, str(seg_dir / "00000000000000000000.log"), "--deep-iteration")
    rec = [line for line in deep if line.startswith("|")]
    assert rec and not any(" payload: " in line for line in rec)


def test_index_and_time_index_entries(seg_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    idx = seg_dir / "00000000000000000000.index"
    rc, out = _run(capsys, str(idx))
    assert rc == 0
    entries = [tuple(map(int, re.findall(r"-?\d+", line))) for line in out[1:]]
    assert entries and all(re.fullmatch(r"offset: \d+ position: \d+", line) for line in out[1:])
    # every entry points at the batch that ends at its offset
    data = (seg_dir / "00000000000000000000.log").read_bytes()
    for offset, position in entries:
        assert parse_header(data, position).last_offset == offset
    rc, out = _run(capsys, "--files", str(seg_dir / "00000000000000000000.timeindex"))
    assert rc == 0
    assert out[1:] and all(re.fullmatch(r"timestamp: \d+ offset: \d+", line) for line in out[1:])
    ts = [int(line.split()[1]) for line in out[1:]]
    assert ts == sorted(ts) and ts[-1] <= TS + 40


def test_verify_index_only_reports_mismatches(
    seg_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idx = seg_dir / "00000000000000000000.index"
    rc, out = _run(capsys, "--verify-index-only", str(idx))
    assert rc == 0 and out == [f"Dumping {idx}"]
    raw = bytearray(idx.read_bytes())
    raw[0:4] = (int.from_bytes(raw[0:4], "big") + 1).to_bytes(4, "big")  # wrong relative offset
    idx.write_bytes(raw)
    rc, out = _run(capsys, "--verify-index-only", str(idx))
    assert rc == 1
    assert out[1] == f"Mismatches in :{idx.absolute()}"
    assert re.fullmatch(r"  Index offset: (\d+), log offset: (\d+)", out[2])


def test_index_sanity_check(seg_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    idx = seg_dir / "00000000000000000000.index"
    rc, out = _run(capsys, "--index-sanity-check", str(idx))
    assert rc == 0 and out[1] == f"{idx} passed sanity check."
    with open(idx, "ab") as f:
        f.write(b"\0\0\0")  # not a whole entry
    rc, out = _run(capsys, "--index-sanity-check", str(idx))
    assert rc == 1 and "failed sanity check" in out[1]


def test_time_index_mismatch_is_reported(seg_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tix = seg_dir / "00000000000000000000.timeindex"
    raw = bytearray(tix.read_bytes())
    raw[0:8] = (int.from_bytes(raw[0:8], "big") + 5).to_bytes(8, "big")
    tix.write_bytes(raw)
    rc, out = _run(capsys, "--verify-index-only", str(tix))
    assert rc == 1
    assert f"Found timestamp mismatch in :{tix.absolute()}" in out


def test_corrupt_and_truncated_log(seg_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = seg_dir / "00000000000000000000.log"
    data = bytearray(f.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records: CRC no longer matches
    f.write_bytes(bytes(data[:-7]))
    rc, out = _run(capsys, str(f))
    assert rc == 1
    assert out[2].endswith("isvalid: false")
    assert out[-1].startswith("Found ") and out[-1].endswith(
        f"invalid bytes at the end of {f.name}"
    )


def test_txn_index(seg_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _run(capsys, str(seg_dir / "00000000000000000000.txnindex"))
    assert rc == 0
    assert out[1] == "version: 0 producerId: 7 firstOffset: 4 lastOffset: 6 lastStableOffset: 7"


def test_unknown_and_missing_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "leader-epoch-checkpoint"
    other.write_text("0\n0\n")
    rc, out = _run(capsys, str(other), str(tmp_path / "00000000000000000000.log"))
    assert out[1] == f"Ignoring unknown file {other}"
    assert rc == 1


def test_admin_cli_routes_dump_log(seg_dir: Path) -> None:
    f = seg_dir / "00000000000000000000.log"
    p = subprocess.run(
        [sys.executable, "-m", "kafkalite.cli.admin", "dump-log", str(f), "--print-data-log"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert "| offset: 0 " in p.stdout and "payload: hello" in p.stdout
