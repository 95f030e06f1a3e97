"""Profiler captures: where the time of a few steps went, and which finding each one explains.

A workload rank profiles K consecutive steps (``soak.workloads.capture``) once after warm-up
(the baseline), at a planned cadence, and when the daemon asks for it by writing a request
file in the run folder. Each capture becomes one ``capture`` event in the store whose
``detail`` is the summary built here (``build_summary``); the raw trace stays in the run folder.

This module is the one home of

* the request files (``profile/request-<n>.json``): written by the daemon, read by the ranks;
* the summary of a capture: phase shares, top operators, CPU fallbacks, the dominant phase;
* which capture a finding links to (``link``): the first one taken after the finding was
  raised on an affected rank, so the app, the PDF and ``soak profile`` agree;
* when the daemon asks for a capture (``CapturePlanner``): which findings, which window, how
  often.

No torch here: the daemon and the report import it.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.runfolder import PROFILE

PHASES = ("data", "forward", "backward", "optimizer", "comm")
"""Step phases, each labelled ``torch.profiler.record_function("soak.<phase>")`` in the loop."""
SHARES = (*PHASES, "idle")
TRIGGER_KINDS = ("throughput_degradation", "utilization_dropouts", "straggler")
"""Finding kinds for which the daemon asks the ranks for a capture."""
LABELS = ("baseline", "cadence", "request")
TOP_N = 10  # operators kept per list in the summary (the report shows five)
_REQUEST = "request-{n}.json"
# Ops that do no arithmetic: on a device backend they run on the host by design, so they
# are not CPU fallbacks.
_HOST_ONLY = ("aten::empty", "aten::view", "aten::as_strided", "aten::to", "aten::_to_copy",
              "aten::copy_", "aten::detach", "aten::t", "aten::transpose", "aten::reshape",
              "aten::_reshape_alias", "aten::expand", "aten::slice", "aten::select", "aten::unsqueeze",
              "aten::squeeze", "aten::permute", "aten::contiguous", "aten::item", "aten::_local_scalar_dense",
              "aten::set_", "aten::resize_", "aten::lift_fresh", "aten::alias", "aten::split", "aten::chunk",
              "aten::record_stream", "aten::empty_strided", "aten::zeros", "aten::ones", "aten::fill_",
              "aten::zero_", "aten::is_nonzero", "aten::result_type", "aten::numel")


def profile_dir(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / PROFILE


# ----------------------------------------------------------------------------- requests
@dataclass(frozen=True)
class Request:
    """The daemon asks ``ranks`` (None: all) of ``workloads`` (None: all) to profile the steps
    that start within [``start_ts``, ``end_ts``] (unix wall seconds), at least ``min_steps``."""

    n: int
    start_ts: float
    end_ts: float
    reason: str
    ranks: tuple[int, ...] | None = None
    workloads: tuple[str, ...] | None = None
    finding: Mapping[str, Any] = field(default_factory=dict)

    def concerns(self, workload: str, rank: int) -> bool:
        return ((self.ranks is None or rank in self.ranks)
                and (self.workloads is None or workload in self.workloads))

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "start_ts": self.start_ts, "end_ts": self.end_ts, "reason": self.reason,
                "ranks": None if self.ranks is None else list(self.ranks),
                "workloads": None if self.workloads is None else list(self.workloads),
                "finding": dict(self.finding)}


def write_request(run_dir: str | os.PathLike[str], req: Request) -> Path:
    """``profile/request-<n>.json``, written to a temp name and renamed: a polling rank reads
    the whole request or none of it."""
    folder = profile_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / _REQUEST.format(n=req.n)
    tmp = folder / f".{path.name}.tmp"
    tmp.write_text(json.dumps(req.to_dict()), encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_requests(run_dir: str | os.PathLike[str]) -> list[Request]:
    """Every complete request in the run folder, oldest first; unreadable files are skipped."""
    out = []
    folder = profile_dir(run_dir)
    if not folder.is_dir():
        return out
    for p in folder.glob("request-*.json"):
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
            out.append(Request(int(d["n"]), float(d["start_ts"]), float(d["end_ts"]), str(d.get("reason") or ""),
                               None if d.get("ranks") is None else tuple(int(r) for r in d["ranks"]),
                               None if d.get("workloads") is None else tuple(str(w) for w in d["workloads"]),
                               d.get("finding") or {}))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return sorted(out, key=lambda r: r.n)


def next_request_number(run_dir: str | os.PathLike[str]) -> int:
    return max((r.n for r in read_requests(run_dir)), default=0) + 1


# ----------------------------------------------------------------------------- summary
def build_summary(*, phase_us: Mapping[str, float], wall_us: float, host_ops: Mapping[str, tuple[float, int]],
                  device_ops: Mapping[str, tuple[float, int]] | None, backend: str,
                  fallbacks: Mapping[str, tuple[float, int]] | None = None) -> dict[str, Any]:
    """The summary of one capture from what the profiler measured.

    ``phase_us``: total time of each ``soak.<phase>`` range (microseconds); ``wall_us``: the
    capture's wall time; ``host_ops``/``device_ops``: operator -> (self time us, calls), the
    ``soak.*`` ranges left out; ``fallbacks``: operators that ran on the CPU inside the step
    while the backend is a device. On CPU the device *is* the CPU: the device list is the host
    list and CPU fallbacks do not apply (None).
    """
    wall = max(float(wall_us), 1e-9)
    shares: dict[str, float | None] = {p: min(1.0, float(phase_us.get(p, 0.0)) / wall) for p in PHASES}
    busy = sum(v for v in shares.values() if v is not None)
    shares["idle"] = max(0.0, 1.0 - busy)
    dominant = max(SHARES, key=lambda k: shares[k] or 0.0)
    on_cpu = backend == "cpu"
    dev = host_ops if on_cpu else device_ops
    return {
        "backend": backend,
        "wall_s": wall / 1e6,
        "shares": shares,
        "dominant": dominant,
        "top_host_ops": _top(host_ops),
        "top_device_ops": None if dev is None else _top(dev),
        "cpu_fallbacks": None if on_cpu or fallbacks is None else _top(fallbacks),
        "cpu_fallbacks_note": "not applicable on CPU" if on_cpu else None,
    }


def _top(ops: Mapping[str, tuple[float, int]]) -> list[dict[str, Any]]:
    rows = sorted(((n, us, c) for n, (us, c) in ops.items() if us > 0), key=lambda r: (-r[1], r[0]))
    return [{"name": n, "self_ms": round(us / 1000.0, 3), "calls": int(c)} for n, us, c in rows[:TOP_N]]


def is_host_only(name: str) -> bool:
    return name in _HOST_ONLY or not name.startswith("aten::")


_HOST_CATS = ("cpu_op", "user_annotation", "python_function")
_LAUNCH_CATS = ("cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset")
_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def summarize_trace(trace: Mapping[str, Any], *, backend: str, wall_us: float) -> dict[str, Any]:
    """``build_summary`` of a Chrome trace as ``torch.profiler``'s ``export_chrome_trace``
    writes it: phases from the ``soak.*`` user annotations, host self time from the nesting of
    complete (``X``) events per thread, device time from kernel and memcpy events, and as CPU
    fallbacks the arithmetic ``aten::`` ops under which no kernel was launched.

    Parsing the exported file is ~50x faster than ``profile.events()``, which builds a Python
    tree of every event (seconds for a few steps of a small model)."""
    events = [e for e in trace.get("traceEvents", ()) if isinstance(e, dict) and e.get("ph") == "X"
              and isinstance(e.get("ts"), int | float) and isinstance(e.get("dur"), int | float)]
    phase_us = {p: 0.0 for p in PHASES}
    host: dict[str, tuple[float, int]] = {}
    device: dict[str, tuple[float, int]] | None = None if backend == "cpu" else {}
    fallbacks: dict[str, tuple[float, int]] | None = None if backend == "cpu" else {}
    threads: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for e in events:
        cat, name = e.get("cat"), str(e.get("name"))
        if cat == "user_annotation" and name.startswith("soak.") and name[5:] in phase_us:
            phase_us[name[5:]] += float(e["dur"])
        elif cat in _DEVICE_CATS and device is not None:
            _add(device, name, float(e["dur"]))
        if cat in _HOST_CATS or cat in _LAUNCH_CATS and cat not in _DEVICE_CATS:
            threads.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    for evs in threads.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[list[Any]] = []  # [event, children's time, launched a kernel]
        for e in evs:
            while stack and stack[-1][0]["ts"] + stack[-1][0]["dur"] <= e["ts"]:
                _close(stack, host, fallbacks)
            stack.append([e, 0.0, e.get("cat") in _LAUNCH_CATS])
        while stack:
            _close(stack, host, fallbacks)
    return build_summary(phase_us=phase_us, wall_us=wall_us, host_ops=host, device_ops=device,
                         backend=backend, fallbacks=fallbacks)


def _close(stack: list[list[Any]], host: dict[str, tuple[float, int]],
           fallbacks: dict[str, tuple[float, int]] | None) -> None:
    """Pop the innermost open event: its self time is its duration less its children's."""
    e, child_us, launched = stack.pop()
    name = str(e["name"])
    self_us = max(0.0, float(e["dur"]) - child_us)
    if e.get("cat") in _HOST_CATS and not name.startswith(("soak.", "ProfilerStep")):
        _add(host, name, self_us)
        if fallbacks is not None and not launched and not is_host_only(name):
            _add(fallbacks, name, self_us)
    if stack:
        stack[-1][1] += float(e["dur"])
        stack[-1][2] = stack[-1][2] or launched


def _add(acc: dict[str, tuple[float, int]], name: str, us: float) -> None:
    t, c = acc.get(name, (0.0, 0))
    acc[name] = (t + us, c + 1)


# ----------------------------------------------------------------------------- linking
@dataclass(frozen=True)
class Capture:
    """One capture as the store holds it (a ``capture`` event)."""

    id: int  # 1-based, in time order within the run
    ts: float  # run time line, when the capture ended
    workload: str | None
    rank: int | None
    detail: Mapping[str, Any]

    @property
    def label(self) -> str:
        return str(self.detail.get("label") or "")

    @property
    def ok(self) -> bool:
        return not self.detail.get("error")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "ts": self.ts, "workload": self.workload, "rank": self.rank, **dict(self.detail)}


def captures_from_events(events: Iterable[Any]) -> list[Capture]:
    """The ``capture`` events of a run (``Store.load_events(run_id, kind="capture")``) in time order."""
    evs = sorted((e for e in events if e.kind == "capture"), key=lambda e: e.ts)
    return [Capture(i + 1, float(e.ts), e.workload, e.rank, dict(e.detail or {})) for i, e in enumerate(evs)]


def baselines(captures: Sequence[Capture]) -> dict[tuple[str | None, int | None], Capture]:
    """The first successful baseline capture of each (workload, rank)."""
    out: dict[tuple[str | None, int | None], Capture] = {}
    for c in captures:
        if c.label == "baseline" and c.ok:
            out.setdefault((c.workload, c.rank), c)
    return out


def _start(finding: Mapping[str, Any]) -> float | None:
    v = finding.get("start")
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def _asked_for(c: Capture, f: Mapping[str, Any]) -> bool:
    asked = c.detail.get("finding") or {}
    return asked.get("kind") == f.get("kind") and f.get("device") in (asked.get("devices") or [asked.get("device")])


def link(findings: Sequence[Mapping[str, Any]], captures: Sequence[Capture]) -> list[int | None]:
    """For each finding, the id of the capture that explains it, or None.

    The capture the daemon asked for because of this finding (same kind and chip) wins; else
    the first successful non-baseline capture taken after the finding's first evidence.
    Captures of any rank qualify: a finding names a chip, and on one host every rank shares
    the CPU. A finding's end moves on while the run lasts, so its start is the anchor.
    """
    out: list[int | None] = []
    for f in findings:
        kind = f.get("kind")
        if kind not in TRIGGER_KINDS:
            out.append(None)
            continue
        t = _start(f)
        ok = [c for c in captures if c.ok and c.label != "baseline"]
        asked = [c for c in ok if _asked_for(c, f)]
        later = [c for c in ok if t is None or c.ts >= t]
        best = (asked or later or [None])[0]
        out.append(None if best is None else best.id)
    return out


@dataclass(frozen=True)
class Explained:
    """A finding beside the capture taken at it and the same rank's baseline."""

    finding: Mapping[str, Any]
    capture: Capture | None
    baseline: Capture | None


def explain(findings: Sequence[Mapping[str, Any]], caps: Sequence[Capture]) -> list[Explained]:
    """Every finding of a ``TRIGGER_KINDS`` kind with its linked capture (None: none taken)
    and the baseline of the capture's rank (else the first baseline of the run)."""
    by_id = {c.id: c for c in caps}
    base = baselines(caps)
    first_base = next(iter(base.values()), None)
    out = []
    for f, cid in zip(findings, link(findings, caps), strict=True):
        if f.get("kind") not in TRIGGER_KINDS or f.get("severity") == "info":
            continue
        cap = by_id.get(cid) if cid is not None else None
        b = base.get((cap.workload, cap.rank), first_base) if cap is not None else first_base
        out.append(Explained(f, cap, b))
    return out


def attach(analysis: dict[str, Any], caps: Sequence[Capture]) -> dict[str, Any]:
    """Add ``captures`` and each finding's ``capture`` id to an analysis document (in place)."""
    findings = analysis.get("findings") or []
    for f, cid in zip(findings, link(findings, caps), strict=True):
        f["capture"] = cid
    analysis["captures"] = [c.to_dict() for c in caps]
    return analysis


# ----------------------------------------------------------------------------- the daemon's side
@dataclass
class CapturePlanner:
    """Decides, after each online analysis, whether to ask the ranks for a capture.

    One request per new (kind, device) finding of a ``TRIGGER_KINDS`` kind, at most
    ``max_per_hour`` in any hour (wall). For periodic drops the window is placed around the
    next predicted drop, so the captured steps include one; otherwise the capture starts now.
    """

    run_dir: Path
    max_per_hour: int = 4
    steps: int = 10
    lead_s: float = 1.0
    _asked: set[tuple[str, str | None]] = field(default_factory=set)
    _times: list[float] = field(default_factory=list)

    def decide(self, findings: Sequence[Mapping[str, Any]], *, now: float, to_wall: Any,
               step_time_s: float | None = None) -> list[Request]:
        """Requests written for ``findings`` (run time line ``now``; ``to_wall`` maps a run-time
        stamp to unix wall seconds)."""
        made = []
        wall_now = float(to_wall(now))
        new: dict[str, list[Mapping[str, Any]]] = {}  # one request per kind: a global stall drops every chip
        for f in findings:
            key = (str(f.get("kind")), f.get("device"))
            if key[0] in TRIGGER_KINDS and f.get("severity") != "info" and key not in self._asked:
                new.setdefault(key[0], []).append(f)
        for kind, fs in new.items():
            self._times = [t for t in self._times if wall_now - t < 3600.0]
            if len(self._times) >= self.max_per_hour:
                break
            f = fs[0]
            start, end = self.window(f, now, step_time_s)
            devices = ", ".join(str(x.get("device")) for x in fs)
            req = Request(next_request_number(self.run_dir), float(to_wall(start)), float(to_wall(end)),
                          reason=f"{kind} on {devices}",
                          finding={**{k: f.get(k) for k in ("kind", "device", "start", "end", "period_s", "severity")},
                                   "devices": [x.get("device") for x in fs]})
            write_request(self.run_dir, req)
            self._asked.update((kind, x.get("device")) for x in fs)
            self._times.append(wall_now)
            made.append(req)
        return made

    def window(self, f: Mapping[str, Any], now: float, step_time_s: float | None) -> tuple[float, float]:
        """[start, end] on the run time line of the steps to capture."""
        period = f.get("period_s")
        span = max(self.lead_s, (step_time_s or 0.0) * self.steps)
        if not isinstance(period, int | float) or not period > 0:
            return now + self.lead_s, now + self.lead_s + span
        details = f.get("details") or {}
        dur = float(details.get("mean_duration_s") or details.get("max_duration_s") or 0.0)
        last_start = float(f.get("end") or now) - dur
        nxt = last_start + period
        while nxt - 0.2 * period < now + self.lead_s:
            nxt += period
        margin = min(0.2 * period, 60.0)
        return nxt - margin, nxt + dur + margin


def wall_of(clock: Any) -> Any:
    """Run time line -> unix wall seconds for ``clock`` (``soak.clock.ScaledClock``)."""
    def to_wall(ts: float) -> float:
        return time.time() + clock.wall_seconds(ts - clock.now())
    return to_wall
