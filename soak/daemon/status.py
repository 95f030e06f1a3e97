"""The daemon's view of its run at one moment: read by the progress line, /metrics and
sd_notify STATUS, built fresh by the daemon loop (so readers never see a half update); and
the run's workloads and duration in words, as the terminal and the start event say them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from soak.config import Plan
from soak.tomlfile import finite

if TYPE_CHECKING:
    from soak.analysis.numerics import NumericCounts


@dataclass(frozen=True)
class RankStatus:
    workload: str
    rank: int
    step: int
    step_time_s: float | None
    tokens_per_s: float | None
    last_heartbeat_ts: float | None  # on the run's time line
    compute_s: float | None = None  # the last step's time outside the collectives


@dataclass(frozen=True)
class OpenFinding:
    """A finding the run's latest analysis holds, as /metrics names it."""

    kind: str
    severity: str
    node: str | None  # None on a single node
    device: str | None  # None for a whole node
    metric: str | None
    code: str | None


@dataclass(frozen=True)
class LinkTest:
    """This node's pairs in the run's last link test: each peer's bus bandwidth (GB/s)."""

    ts: float  # on the run's time line
    busbw_gbps: Mapping[str, float]  # peer node -> bandwidth of the pair


@dataclass(frozen=True)
class ReliabilitySoFar:
    """The run's reliability so far (``soak.analysis.reliability``), as /metrics serves it."""

    ettr: float | None  # of the time so far; None before any
    lost_s: Mapping[str, float]  # cause -> seconds (run time line)
    failures: Mapping[str, int]  # cause -> unexpected failures of the machine
    node_hours: float
    node_mttf_h_lower90: float | None


@dataclass(frozen=True)
class RunStatus:
    run_id: str
    workload: str
    verdict: str  # running | pass | fail
    elapsed_s: float  # run time line
    remaining_s: float
    restarts: int
    ranks: tuple[RankStatus, ...] = ()
    findings: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (kind, severity) -> n
    passing: bool | None = None  # verdict of the online analysis so far; None before one ran
    state: str = "running"
    clock_offset_s: float | None = None  # a cluster node's clock minus the store's
    # what the latest online analysis left for /metrics (soak.daemon.online.Found)
    open_findings: tuple[OpenFinding, ...] = ()
    criteria: Mapping[str, bool] = field(default_factory=dict)  # judged criteria: met or not
    link_test: LinkTest | None = None
    nodes_by_status: Mapping[str, int] = field(default_factory=dict)  # the judge of a cluster run
    reliability: ReliabilitySoFar | None = None  # the node that judges the run
    numeric: NumericCounts | None = None  # soak.analysis.numerics: the workloads' numerical checks so far


def hms(seconds: float) -> str:
    """``H:MM:SS`` of a span; "N/A" for one that is not a number of seconds (a run recorded
    with an infinite duration before plans refused one)."""
    if not finite(seconds):
        return "N/A"
    s = int(max(0, seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def progress_line(st: RunStatus) -> str:
    """One terminal line: elapsed/remaining, steps, restarts, findings so far."""
    steps = ", ".join(
        f"{r.workload}{'' if len(st.ranks) == 1 else f'/{r.rank}'} step {r.step}"
        + ("" if r.step_time_s is None else f" ({r.step_time_s * 1000:.0f} ms)")
        for r in st.ranks[:4]
    ) or "no steps yet"
    if len(st.ranks) > 4:
        steps += f", +{len(st.ranks) - 4} ranks"
    n_find = sum(st.findings.values())
    fails = sum(n for (_, sev), n in st.findings.items() if sev == "fail")
    find = f"{n_find} findings" + (f" ({fails} fail)" if fails else "")
    return (
        f"[{st.run_id}] {hms(st.elapsed_s)} elapsed, {hms(st.remaining_s)} left | {steps} | "
        f"restarts {st.restarts} | {find}"
    )


def ended_lines(run_id: str, status: str, verdict: str | None, findings: int, withdrawn: list[str],
                most: int = 5) -> list[str]:
    """The run's last lines at the terminal: its end, verdict and final count of findings, and
    the findings announced while it ran that the final analysis did not keep (``withdrawn``:
    their messages), so that the counts said during the run add up."""
    gone = f", {len(withdrawn)} announced during the run withdrawn by the final analysis" if withdrawn else ""
    lines = [f"soak: run {run_id} {status}, verdict {verdict or 'N/A'}, {findings} findings{gone} "
             f"(soak runs show {run_id})"]
    lines += [f"  withdrawn: {m}" for m in withdrawn[:most]]
    if len(withdrawn) > most:
        lines.append(f"  withdrawn: … +{len(withdrawn) - most}")
    return lines


def workload_words(plan: Plan) -> str:
    """"lm on 2 processes, gemm on 1 process": the run's workloads for people."""
    return ", ".join(f"{w.name} on {w.nproc} process{'es' if w.nproc != 1 else ''}" for w in plan.workloads)


def duration_words(seconds: float) -> str:
    """"2 h 30 min": a planned duration for people."""
    h, rem = divmod(int(round(seconds)), 3600)
    m, s = divmod(rem, 60)
    return " ".join(p for p in (f"{h} h" if h else "", f"{m} min" if m else "", f"{s} s" if s else "") if p) or "0 s"
