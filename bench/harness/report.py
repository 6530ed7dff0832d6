"""Tables for the terminal and ``docs/performance.md`` (which is only ever written from here)."""

from __future__ import annotations

import datetime
from pathlib import Path

from bench.harness.workloads import Case

DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"


def fmt(metric: str, v: float | None) -> str:
    if v is None:
        return "—"
    if metric in ("msg/s", "records", "partitions"):
        return f"{v:,.0f}"
    if "ms" in metric.split() or metric.endswith("(ms)"):
        return f"{v:.2f}" if v < 100 else f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}"


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.0f}%"


def _details(case: Case, broker: str) -> str:
    ss = case.samples.get(broker, [])
    if not ss:
        return ""
    keys = [k for k in ss[0].metrics if k != case.primary]
    return ", ".join(f"{k} {fmt(k, case.median(broker, k))}" for k in keys)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "/") for c in cells) + " |"


def table(cases: list[Case], brokers: list[str]) -> str:
    """One markdown table; with two brokers, A and B side by side and the A/B ratio."""
    lines: list[str] = []
    plain = [c for c in cases if c.workload != "startup"]
    if len(brokers) == 1:
        [a] = brokers
        lines.append(
            _row(
                [
                    "workload",
                    "case",
                    "result",
                    "details (median)",
                    "broker CPU",
                    "client CPU",
                    "other CPU",
                    "notes",
                ]
            )
        )
        lines.append(_row(["---"] * 8))
        for c in plain:
            bcpu, ccpu, ocpu = c.cpu(a)
            lines.append(
                _row(
                    [
                        c.workload,
                        c.name,
                        f"{fmt(c.primary, c.median(a, c.primary))} "
                        f"{'' if '(' in c.primary else c.primary}".strip(),
                        _details(c, a),
                        _pct(bcpu),
                        _pct(ccpu),
                        _pct(ocpu),
                        c.notes(a),
                    ]
                )
            )
    else:
        a, b = brokers[:2]
        lines.append(
            _row(
                [
                    "workload",
                    "case",
                    "metric",
                    a,
                    b,
                    f"{a} vs {b} (>1: {a} better)",
                    f"CPU {a} (broker/client/other)",
                    f"CPU {b} (broker/client/other)",
                    "notes",
                ]
            )
        )
        lines.append(_row(["---"] * 9))
        for c in plain:
            va, vb = c.median(a, c.primary), c.median(b, c.primary)
            ratio = "—"
            if va and vb:
                # how many times better A is: > 1 means A wins, whichever way the metric points
                r = va / vb if c.higher_better else vb / va
                ratio = f"{r:.3g}x"
            (ab, ac, ao), (bb, bc, bo) = c.cpu(a), c.cpu(b)
            notes = "; ".join(f"{n}: {c.notes(n)}" for n in (a, b) if c.notes(n))
            arrow = "↑" if c.higher_better else "↓"
            lines.append(
                _row(
                    [
                        c.workload,
                        c.name,
                        f"{c.primary} {arrow}",
                        fmt(c.primary, va),
                        fmt(c.primary, vb),
                        ratio,
                        f"{_pct(ab)} / {_pct(ac)} / {_pct(ao)}",
                        f"{_pct(bb)} / {_pct(bc)} / {_pct(bo)}",
                        notes,
                    ]
                )
            )
    for c in cases:
        if c.workload == "startup":
            for s in c.samples.get("output", []):
                lines += ["", "Start-up (`bench/startup_bench.py`):", "", "```", s.note, "```"]
    return "\n".join(lines)


# (label, workload, case-name prefix, metric, bound, at least?) — issue 7's targets
TARGETS = [
    (
        "produce 100 B, acks=1, 1 partition ≥ 500k msg/s",
        "produce",
        "100 B, acks=1, 1 part, none",
        "msg/s",
        500_000,
        True,
    ),
    ("produce 1 KiB ≥ 200 MB/s", "produce", "1024 B, acks=1, 1 part, none", "MB/s", 200, True),
    ("consume 1 KiB backlog ≥ 400 MB/s", "consume", "1024 B records", "MB/s", 400, True),
    ("latency at 10k msg/s: p50 < 1 ms", "latency", "10,000 msg/s", "p50 ms", 1, False),
    ("latency at 10k msg/s: p99 < 5 ms", "latency", "10,000 msg/s", "p99 ms", 5, False),
    (
        "10,000 partitions: start-up < 5 s",
        "scale",
        "start-up with 10,000",
        "start-up with 10,000 partitions (s)",
        5,
        False,
    ),
    (
        "10,000 partitions: Metadata < 100 ms",
        "scale",
        "Metadata, all",
        "Metadata, all 10,000 partitions (ms)",
        100,
        False,
    ),
    (
        "10,000 partitions: idle RSS < 200 MB (after restart)",
        "scale",
        "RSS after restart",
        "RSS after restart (MB)",
        200,
        False,
    ),
]

# Figures quoted in issue 7 (rdkafka_performance, same machine), not measured here.
QUOTED: list[tuple[str, str, str, str, dict[str, float], bool]] = [
    (
        "produce 100 B msg/s",
        "produce",
        "100 B, acks=1, 1 part, none",
        "msg/s",
        {"kfake": 1_870_000, "nafka": 96_000},
        True,
    ),
    (
        "produce 1 KiB MB/s",
        "produce",
        "1024 B, acks=1, 1 part, none",
        "MB/s",
        {"kfake": 406, "nafka": 66},
        True,
    ),
    ("consume 100 B MB/s", "consume", "100 B records", "MB/s", {"kfake": 221}, True),
    ("consume 100 B msg/s", "consume", "100 B records", "msg/s", {"nafka": 31_000}, True),
    ("latency p50 at 10k msg/s", "latency", "10,000 msg/s", "p50 ms", {"kfake": 0.17}, False),
    ("latency p99 at 10k msg/s", "latency", "10,000 msg/s", "p99 ms", {"kfake": 4.2}, False),
]


def _find(cases: list[Case], workload: str, prefix: str) -> Case | None:
    for c in cases:
        if c.workload == workload and c.name.startswith(prefix):
            return c
    return None


def targets(cases: list[Case], broker: str) -> str:
    """Issue 7's targets met or not, the acks=all/acks=1 ratios, and the quoted brokers."""
    lines = [_row(["target (issue 7)", broker, "met"]), _row(["---"] * 3)]
    for label, wl, prefix, metric, bound, at_least in TARGETS:
        c = _find(cases, wl, prefix)
        v = c.median(broker, metric) if c else None
        if v is None:
            continue
        ok = v >= bound if at_least else v < bound
        lines.append(_row([label, fmt(metric, v), "yes" if ok else "no"]))
    for size in ("100 B", "1024 B"):
        one = _find(cases, "produce", f"{size}, acks=1, 1 part, none")
        every = _find(cases, "produce", f"{size}, acks=all, 1 part, none")
        a = one.median(broker, "msg/s") if one else None
        b = every.median(broker, "msg/s") if every else None
        if a and b:
            lines.append(
                _row(
                    [
                        f"produce {size}: acks=all within 10% of acks=1",
                        f"{b / a:.2f} of acks=1",
                        "yes" if b >= 0.9 * a else "no",
                    ]
                )
            )
    quoted = [
        _row(["figure", broker, "kfake (quoted)", "ratio", "nafka (quoted)", "ratio"]),
        _row(["---"] * 6),
    ]
    for label, wl, prefix, metric, ref, higher in QUOTED:
        c = _find(cases, wl, prefix)
        v = c.median(broker, metric) if c else None
        if v is None:
            continue
        cells = [label, fmt(metric, v)]
        for other in ("kfake", "nafka"):
            r = ref.get(other)
            if r is None:
                cells += ["—", "—"]
            else:
                cells += [fmt(metric, r), f"{(v / r if higher else r / v):.3g}x"]
        quoted.append(_row(cells))
    out = "\n".join(lines)
    if len(quoted) > 2:
        out += (
            "\n\nAgainst the figures quoted in issue 7 (measured there with "
            "rdkafka_performance; ratio > 1: " + broker + " better; the 5x-nafka target "
            "needs ≥ 5):\n\n" + "\n".join(quoted)
        )
    return out


def machine_block(machine: dict[str, str]) -> str:
    return "\n".join(f"- {k}: {v}" for k, v in machine.items())


def write_doc(
    *,
    command: str,
    machine: dict[str, str],
    brokers: dict[str, str],
    client: str,
    cases: list[Case],
    skipped: list[str],
    quick: bool,
    rounds: int,
    elapsed_s: float,
) -> Path:
    """Regenerate docs/performance.md from one run of the harness."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    names = list(brokers)
    body = [
        "# Performance",
        "",
        "<!-- Generated by `python -m bench ... --write-docs`; do not edit by hand. -->",
        "",
        f"Measured {now} with:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"({'quick suite' if quick else 'full suite'}, {rounds} round(s)"
        + (", A/B, B/A, ..." if len(names) > 1 else "")
        + f", {elapsed_s / 60:.1f} min; figures are "
        "medians over the rounds.)",
        "",
        "## Machine",
        "",
        machine_block(machine),
        "",
        "## Brokers and client",
        "",
        *[f"- {n}: {d}" for n, d in brokers.items()],
        f"- load client: {client}",
        "",
        "## Results",
        "",
        table(cases, names),
        "",
        "## Targets",
        "",
        targets(cases, names[0]),
        "",
        "## How to read this",
        "",
        "- Throughput in MB/s counts record values only (1 MB = 10^6 bytes); msg/s counts records.",
        "- Latency is end to end: the producer writes its send time (CLOCK_MONOTONIC) into each",
        "  record and the consumer subtracts it on receipt; records of the warm-up are not counted.",
        "- CPU is user + system time over the client's wall time; 100% = one core (the machine",
        "  has 200%). Broker and client share the same cores, so a client near 100% means the",
        "  client, not the broker, set the pace. *Other* is the busy time of everything else on",
        "  the machine during the run (from /proc/stat): the noise of a shared machine.",
        "- Consumers are assigned partitions directly (no consumer group).",
        "- Before each workload (up to 20 s) and each run (up to 10 s) the harness runs `sync`",
        "  and waits for the cores to go idle, so the gigabytes the last run wrote are not",
        "  written back (or throttled by the kernel's dirty-page limits) during the next one.",
        "  One broker process serves every workload in turn.",
        "- The machine is shared: other jobs may run during a benchmark (see the load average).",
    ]
    if skipped:
        body += ["", "## Skipped or incomplete", "", *[f"- {s}" for s in skipped]]
    DOC.write_text("\n".join(body) + "\n")
    return DOC
