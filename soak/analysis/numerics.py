"""Numerical correctness: the workloads' own checks of what their chips computed, judged.

A workload that checks its numbers writes a heartbeat event for every check that failed
(``soak.workloads``) and counts the checks it ran on its step lines (``numeric_checks``,
cumulative per rank, passed or not). The daemon stores each event as it happens
(``soak.daemon.heartbeat``) with its severity and the chip it names; this module says what
they mean, in one place, for the daemon, the judge, the report and ``soak nodes``:

=================  ====================================  =====================================
heartbeat event    stored kind (finding kind)            what it is
=================  ====================================  =====================================
``sdc_mismatch``   ``sdc``                               a wrong result: a product against a
                                                         CPU reference, a collective, a
                                                         recomputed loss, a replica's weights
``nonfinite``      ``nonfinite``                         a NaN/Inf loss or gradient norm
``loss_spike``     ``loss_spike``                        a loss far above its recent median
``alignment``      ``alignment`` (no finding)            the first steps' losses against a
                                                         CPU reference (precision alignment)
=================  ====================================  =====================================

Each event names a ``suspect_rank`` (the rank whose chip computed wrong; None: nobody settled
it, and then no chip is named) and a ``classification`` from a rerun of the step:

- ``chip`` (recurs only on that chip) or None with a suspect (a direct comparison against a
  reference, wrong on the rank that made it): confirmed, **fail**, naming the chip;
- ``transient`` (did not recur): **warn**; a second transient on the same chip **fails** it
  (a chip that upsets twice in one soak is not a cosmic-ray accident);
- ``everywhere`` (recurs on every chip: the model's numerics, e.g. an fp16 overflow): **warn**,
  a finding of the workload that names no chip;
- a wrong result no rank was settled for (a collective's result, an exact known value, wrong
  on a rank that only received it): **fail**, naming no chip (the node's); a non-finite value
  or a spike nobody classified: **warn**.

At Llama 3's published rate (6 silent-data-corruption interruptions in about 21 M GPU-hours)
a 64-chip, 72-hour soak expects 0.0013 of them: one confirmed wrong result has found a chip
that must not go to a customer, so the criterion "numerical correctness" fails on any.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from soak.analysis.messages import say
from soak.analysis.model import Finding
from soak.device_names import HOST_DEVICE, rank_device

HEARTBEAT_EVENTS = {"sdc_mismatch": "sdc", "nonfinite": "nonfinite", "loss_spike": "loss_spike",
                    "alignment": "alignment"}
"""Heartbeat event -> stored event kind."""
KINDS = ("sdc", "nonfinite", "loss_spike")
"""The finding kinds of this module (judged by the "numerical correctness" criterion)."""
CODES = {"sdc": "sdc.mismatch", "nonfinite": "nonfinite.value", "loss_spike": "loss_spike.spike"}
"""The finding code of each kind."""
CLASSES = ("chip", "transient", "everywhere")
CHECKS = ("gemm", "collective", "canary", "recompute", "replica")
"""The checks a finding names (a workload's own check names, as ``gemm_cpu``, by their family)."""


def check_family(check: Any) -> str:
    """``gemm_cpu`` and ``gemm_first`` are the GEMM check's two comparisons: ``gemm``."""
    name = str(check or "unknown")
    return name.split("_", 1)[0] if name.startswith("gemm") else name


def _confirmed(detail: Mapping[str, Any]) -> bool:
    cls = detail.get("classification")
    return cls == "chip" or (cls is None and isinstance(detail.get("suspect_rank"), int))


def base_severity(kind: str, detail: Mapping[str, Any]) -> str:
    """The severity of one numerical event by itself (a second transient on a chip is
    :class:`Severities`')."""
    if kind == "alignment":
        tol, diff = detail.get("tolerance"), detail.get("max_rel_diff")
        return "warn" if isinstance(tol, int | float) and isinstance(diff, int | float) and diff > tol else "info"
    if _confirmed(detail):
        return "fail"
    cls = detail.get("classification")
    if cls in ("transient", "everywhere"):
        return "warn"
    return "fail" if kind == "sdc" else "warn"  # a wrong result against a known value, nobody settled


class Severities:
    """Severities of the numerical events in the order they come, with the transients seen
    per chip (or rank) so far: the second transient on one is a fail."""

    def __init__(self) -> None:
        self.transients: dict[str, set[Any]] = {}  # chip -> the steps of its transients

    def judge(self, detail: Mapping[str, Any], where: str | None, kind: str | None = None) -> str:
        kind = kind or ("sdc" if detail.get("check") else "nonfinite" if detail.get("what") else
                        "alignment" if "max_rel_diff" in detail else "loss_spike")
        sev = base_severity(kind, detail)
        if detail.get("classification") == "transient" and where is not None:
            # one upset seen by several checks of one step (a NaN loss and its gradient norm)
            # is one transient: a second is another step's
            steps = self.transients.setdefault(where, set())
            steps.add(detail.get("step"))
            if len(steps) >= 2:
                sev = "fail"
        return sev


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def chip_order(chips: Iterable[str]) -> list[str]:
    """A node's chips in the order a framework numbers them (``npu0-0``, ``npu0-1``, ...,
    ``npu10-0``; ``cuda0``, ``cuda1``, ...), host rows left out."""
    return sorted((c for c in set(chips) if c != HOST_DEVICE and not c.startswith("cpu")), key=_natural)


def chip_of_rank(rank: int, device: str | None, chips: Sequence[str], nproc: int) -> str | None:
    """The chip a rank ran on: the local device index it wrote (``npu:3``) or, on a CPU-only
    rank (the simulated fleet), its local rank, into the node's chips in ``chip_order``.
    None when the node has no chip there."""
    m = re.fullmatch(r"\w+:(\d+)", device or "")
    local = int(m.group(1)) if m else rank % max(1, nproc)
    return chips[local] if 0 <= local < len(chips) else None


# --------------------------------------------------------------------------- findings
@dataclass(frozen=True)
class NumericEvent:
    """One stored numerical event, as the judge reads it."""

    kind: str
    ts: float
    node: str | None
    workload: str | None
    rank: int | None  # the rank that wrote it
    step: int | None
    detail: Mapping[str, Any]
    message: str | None

    @property
    def suspect(self) -> int | None:
        s = self.detail.get("suspect_rank")
        return s if isinstance(s, int) else None

    @property
    def cls(self) -> str | None:
        c = self.detail.get("classification")
        return c if c in CLASSES else None

    @property
    def where(self) -> str | None:
        """The chip it names (the rank's key where no chip was resolved); None: no chip."""
        if self.cls == "everywhere" or self.suspect is None:
            return None
        return self.detail.get("chip") or rank_device(self.workload or "workload", self.suspect)

    @property
    def metric(self) -> str:
        if self.kind == "sdc":
            return check_family(self.detail.get("check"))
        if self.kind == "nonfinite":
            return str(self.detail.get("what") or "loss")
        return "loss"


def events_of(events: Iterable[Any]) -> list[NumericEvent]:
    """The run's numerical events (``EventRecord``s of kinds ``sdc``, ``nonfinite``,
    ``loss_spike``), in time order."""
    out = []
    for e in events:
        if e.kind not in KINDS:
            continue
        d = e.detail if isinstance(e.detail, Mapping) else {}
        step = d.get("step")
        out.append(NumericEvent(e.kind, float(e.ts), e.node, e.workload, e.rank,
                                int(step) if isinstance(step, int | float) else None, d, e.message))
    return sorted(out, key=lambda x: x.ts)


def assess(events: Iterable[Any]) -> list[Finding]:
    """One finding per kind, place (node, chip) and check: the worst of its events, a second
    transient on one chip failing it."""
    sev_of = Severities()
    groups: dict[tuple[str, str | None, str | None, str], list[tuple[NumericEvent, str]]] = {}
    for e in events_of(events):
        where = e.where
        sev = sev_of.judge(e.detail, None if where is None else f"{e.node}/{where}", e.kind)
        groups.setdefault((e.kind, e.node, where, e.metric), []).append((e, sev))
    return [_finding(kind, node, where, metric, evs) for (kind, node, where, metric), evs in groups.items()]


_RANK = {"info": 0, "warn": 1, "fail": 2}


def _finding(kind: str, node: str | None, where: str | None, metric: str,
             evs: list[tuple[NumericEvent, str]]) -> Finding:
    worst_sev = max((s for _, s in evs), key=_RANK.__getitem__)
    # the event the finding is said from: the first of its worst severity
    e = next(x for x, s in evs if s == worst_sev)
    d = e.detail
    cls = e.cls
    transients = len({x.step for x, _ in evs if x.cls == "transient"})
    values: dict[str, Any] = {
        "check": metric if kind == "sdc" else None, "comparison": d.get("check"), "node": node, "device": where,
        "serial": d.get("serial"), "rank": e.suspect, "reported_by": e.rank, "workload": e.workload, "step": e.step,
        "error": d.get("error"), "tolerance": d.get("tolerance"), "class": cls, "value": d.get("value"),
        "what": d.get("what"), "loss": d.get("loss"), "median": d.get("median"), "multiple": d.get("multiple"),
        "count": len(evs), "transients": transients if transients > 1 else None,
        "chip": where if where is not None and where == d.get("chip") else None,
        "class_chip": cls == "chip" or (cls is None and e.suspect is not None),
        "class_transient": cls == "transient", "class_everywhere": cls == "everywhere",
        "unsettled": cls is None and e.suspect is None, "message": e.message,
    }
    code = CODES[kind]
    return Finding(
        kind=kind, device=where, node=node, metric=metric, start=evs[0][0].ts, end=evs[-1][0].ts,
        severity=worst_sev, summary=say(code, values), count=len(evs), code=code, values=values,
        details={"steps": [x.step for x, _ in evs[:20]], "severities": [s for _, s in evs[:20]]},
    )


# --------------------------------------------------------------------------- evidence
@dataclass(frozen=True)
class RankChecks:
    """How many numerical checks one rank ran, over which steps (from the steps table)."""

    node: str | None
    workload: str
    rank: int
    checks: int
    first_step: int
    last_step: int
    device: str | None = None  # its chip, where the run's chips name it


@dataclass(frozen=True)
class NumericEvidence:
    """The checks of every rank of a run, each rank placed on its chip where one is known."""

    ranks: tuple[RankChecks, ...]

    @staticmethod
    def of(rows: Iterable[tuple[Any, ...]], chips: Mapping[str | None, Sequence[str]],
           nproc: Mapping[str, int]) -> NumericEvidence:
        """``rows``: ``Store.numeric_checks`` (node, workload, rank, checks, first step, last
        step); ``chips``: each node's chips in ``chip_order``; ``nproc``: ranks per node of
        each workload."""
        out = []
        for node, wl, rank, checks, first, last in rows:
            chip = chip_of_rank(int(rank), None, chips.get(node, ()), nproc.get(wl, 1))
            out.append(RankChecks(node, wl, int(rank), int(checks or 0), int(first or 0), int(last or 0), chip))
        return NumericEvidence(tuple(out))

    def per_chip(self) -> dict[tuple[str | None, str], int]:
        """Checks per (node, chip) (a rank with no chip: its rank key)."""
        out: dict[tuple[str | None, str], int] = {}
        for r in self.ranks:
            key = (r.node, r.device or rank_device(r.workload, r.rank))
            out[key] = out.get(key, 0) + r.checks
        return out


# --------------------------------------------------------------------------- while the run goes
@dataclass(frozen=True)
class NumericCounts:
    """What /metrics serves of the numerical checks: checks run per chip (all of a rank's
    checks, ``check`` "all") and wrong results per chip and check, counted since the run began."""

    checks: Mapping[tuple[str | None, str], int]  # (node, chip) -> checks
    mismatches: Mapping[tuple[str | None, str, str], int]  # (node, chip, check) -> events


class NumericTally:
    """The daemon's running count of the numerical events it stored, and the findings they
    open at once (a fail or warn), before any analysis: the online finding comes within the
    heartbeat poll that read the event, not one analysis later."""

    def __init__(self) -> None:
        self.mismatches: dict[tuple[str | None, str, str], int] = {}
        self.open: dict[tuple[str, str | None, str | None, str], str] = {}  # (kind, node, chip, metric) -> severity

    def add(self, kind: str, node: str | None, workload: str | None, detail: Mapping[str, Any]) -> bool:
        """Count one stored event (``kind``, its detail as ``soak.daemon.heartbeat`` stored
        it); True when it opens a finding or makes an open one worse."""
        if kind not in KINDS:
            return False
        e = NumericEvent(kind, 0.0, node, workload, None, None, detail, None)
        where = e.where
        key = (node, where or "", e.metric)
        self.mismatches[key] = self.mismatches.get(key, 0) + 1
        sev = str(detail.get("severity") or base_severity(kind, detail))
        if sev == "info":
            return False
        fkey = (kind, node, where, e.metric)
        before = self.open.get(fkey)
        if before is not None and _RANK[before] >= _RANK[sev]:
            return False
        self.open[fkey] = sev
        return True

    def counts(self, checks: Mapping[tuple[str | None, str], int]) -> NumericCounts:
        return NumericCounts(dict(checks), dict(self.mismatches))
