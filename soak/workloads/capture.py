"""Bounded profiler captures inside a rank's training loop.

A capture profiles a few consecutive steps with ``torch.profiler`` (CPU activity; CUDA too on
NVIDIA) or ``torch_npu.profiler`` (CPU and NPU activities) on Ascend. Captures happen

* once after warm-up: the baseline (once per rank and run folder);
* every ``--profile-every-s`` seconds when the plan asks (off by default);
* when the daemon writes ``profile/request-<n>.json`` naming this rank
  (``soak.analysis.captures``); the rank looks for new requests between steps, with one
  one listing of the folder at most once a second.

Only the captured steps pay for profiling: outside a capture the phase labels are no-ops.
The summary (``soak.analysis.captures.build_summary``) goes to the heartbeat as a ``capture``
event; the trace is written gzipped to ``profile/`` when it is under ``--profile-max-mb``.
A capture that fails is a ``capture`` event with its error, never a crash of the rank.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from soak.analysis.captures import (
    PHASES,
    Request,
    build_summary,
    profile_dir,
    read_requests,
    summarize_trace,
)
from soak.device_names import rank_device

POLL_EVERY_S = 1.0


class Capturer:
    """Starts and stops captures between steps; ``phase(name)`` labels a part of a step."""

    def __init__(self, run_dir: Path, workload: str, rank: int, backend: str, *, steps: int = 10,
                 warmup: int = 20, every_s: float = 0.0, max_bytes: int = 50 << 20, max_steps: int = 2000,
                 emit: Callable[[int, str, dict[str, Any]], None] = lambda *_: None,
                 clock: Callable[[], float] = time.time) -> None:
        self.run_dir = run_dir
        self.dir = profile_dir(run_dir)
        self.workload, self.rank, self.backend = workload, rank, backend
        self.steps, self.warmup, self.every_s = max(1, steps), warmup, every_s
        self.max_bytes, self.max_steps = max_bytes, max(max_steps, steps)
        self.emit = emit  # emit(step, message, summary)
        self.clock = clock
        self.enabled = steps > 0
        self._prof: Any = None
        self._active: dict[str, Any] | None = None
        self._phase_s: dict[str, float] = {}
        self._first_step: int | None = None
        self._next_cadence = None if every_s <= 0 else clock() + every_s  # never before warm-up
        self._last_poll = 0.0
        self._request_names: set[str] = set()
        self._seen: set[int] = set()
        self._pending: list[Request] = []
        self.baseline_done = self._has_baseline()

    def warm_up(self) -> None:
        """Start and stop the profiler once before training: its first start loads the
        profiling library (~2 s on a CPU), which would otherwise land inside a step."""
        if not self.enabled:
            return
        try:
            prof = _profiler(self.backend, self.dir / ".warm-up")
            prof.start()
            prof.stop()
        except Exception:  # the capture that needs it reports the error
            pass
        finally:
            shutil.rmtree(self.dir / ".warm-up", ignore_errors=True)

    # ------------------------------------------------------------------ the loop's hooks
    @property
    def capturing(self) -> bool:
        return self._active is not None

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """``record_function("soak.<name>")`` while capturing; nothing otherwise."""
        if self._active is None:
            yield
            return
        import torch

        t0 = time.perf_counter()
        with torch.profiler.record_function(f"soak.{name}"):
            yield
        self._phase_s[name] = self._phase_s.get(name, 0.0) + time.perf_counter() - t0

    def before_step(self, step: int) -> None:
        """Called before step ``step``: start a capture when one is due."""
        if not self.enabled or self._active is not None:
            return
        if self._first_step is None:
            self._first_step = step
        now = self.clock()
        label, req = None, None
        if not self.baseline_done and step - self._first_step >= self.warmup:
            label = "baseline"
        elif (req := self._due_request(now)) is not None:
            label = "request"
        elif self._next_cadence is not None and now >= self._next_cadence and step - self._first_step >= self.warmup:
            label = "cadence"
            self._next_cadence = now + self.every_s
        if label is not None:
            self._start(label, step, req)

    def after_step(self, step: int) -> None:
        """Called after step ``step``: stop the capture once it has its steps."""
        a = self._active
        if a is None:
            return
        a["last_step"] = step
        n = step - a["first_step"] + 1
        end_ts = a["req"].end_ts if a["req"] is not None else None
        if n >= self.max_steps or (n >= self.steps and (end_ts is None or self.clock() >= end_ts)):
            self._stop()

    def close(self) -> None:
        if self._active is not None:
            self._stop()

    # ------------------------------------------------------------------ requests
    def _due_request(self, now: float) -> Request | None:
        if now - self._last_poll >= POLL_EVERY_S:
            self._last_poll = now
            # the names, not the folder's mtime: that is of the kernel's coarse clock, and a
            # request renamed in within the tick of the last look left it unchanged, unseen
            # for the rest of the run
            try:
                names = {p.name for p in self.dir.glob("request-*.json")}
            except OSError:
                names = set()
            if names - self._request_names:
                self._request_names |= names
                for r in read_requests(self.run_dir):
                    if r.n in self._seen:
                        continue
                    self._seen.add(r.n)
                    if r.concerns(self.workload, self.rank) and r.end_ts >= now:
                        self._pending.append(r)
        self._pending = [r for r in self._pending if r.end_ts >= now]
        for r in self._pending:
            if r.start_ts <= now:
                self._pending.remove(r)
                return r
        return None

    def _has_baseline(self) -> bool:
        return self.dir.is_dir() and any(self.dir.glob(f"{rank_device(self.workload, self.rank)}-baseline-*"))

    # ------------------------------------------------------------------ start, stop
    def _start(self, label: str, step: int, req: Request | None) -> None:
        if label == "baseline":
            self.baseline_done = True  # one attempt: a failing profiler is not retried every step
        self._active = {"label": label, "first_step": step, "last_step": step, "req": req,
                        "t0": time.perf_counter(), "ts": self.clock()}
        self._phase_s = {}
        try:
            self._prof = _profiler(self.backend, self._trace_dir(label, step))
            self._prof.start()
        except Exception as exc:
            self._fail(f"profiler did not start: {type(exc).__name__}: {exc}")
            return
        self._active["t0"] = time.perf_counter()  # the shares are of the steps, not of the start

    def _trace_dir(self, label: str, step: int) -> Path:
        return self.dir / f"{rank_device(self.workload, self.rank)}-{label}-step{step}"

    def _fail(self, error: str) -> None:
        a = self._active or {}
        self._active, self._prof = None, None
        self.emit(int(a.get("last_step") or 0), f"capture failed: {error}"[:300],
                  {**self._head(a), "error": error[:500]})

    def _head(self, a: dict[str, Any]) -> dict[str, Any]:
        req = a.get("req")
        return {"label": a.get("label"), "first_step": a.get("first_step"), "last_step": a.get("last_step"),
                "steps": None if a.get("first_step") is None else a["last_step"] - a["first_step"] + 1,
                "request": None if req is None else req.n, "reason": None if req is None else req.reason,
                "finding": None if req is None else dict(req.finding), "started_ts": a.get("ts")}

    def _stop(self) -> None:
        a, prof = self._active, self._prof
        wall_us = (time.perf_counter() - a["t0"]) * 1e6
        self._active, self._prof = None, None
        try:
            prof.stop()
            summary, trace = self._summarize_and_write(prof, a, wall_us)
            summary.update(trace)
        except Exception as exc:
            self._active = a
            self._fail(f"{type(exc).__name__}: {exc}")
            return
        head = self._head(a)
        summary = {**head, **summary, "error": None}
        summary["steps_per_s"] = (head["steps"] or 1) / max(summary["wall_s"], 1e-9)
        shares = summary["shares"]
        top = ", ".join(f"{k} {shares[k]:.0%}" for k in sorted(shares, key=lambda k: -(shares[k] or 0))[:3])
        self.emit(a["last_step"], f"capture {a['label']} steps {a['first_step']}-{a['last_step']}: {top}", summary)

    def _summarize_and_write(self, prof: Any, a: dict[str, Any], wall_us: float) -> tuple[dict[str, Any], dict[str, Any]]:
        """The summary, and the trace gzipped under ``profile/`` (dropped over the size cap)."""
        folder = self._trace_dir(a["label"], a["first_step"])
        folder.mkdir(parents=True, exist_ok=True)
        if self.backend == "npu":
            # torch_npu's handler wrote its own folder on stop and parses it offline: the
            # shares come from the loop's own timers of the same ranges
            phase_us = {k: v * 1e6 for k, v in self._phase_s.items() if k in PHASES}
            summary = build_summary(phase_us=phase_us, wall_us=wall_us, host_ops={}, device_ops=None,
                                    backend=self.backend, fallbacks=None)
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            return summary, _kept(folder, size, self.max_bytes, self.run_dir)
        raw = folder / "trace.json"
        try:
            prof.export_chrome_trace(str(raw))
            with open(raw, "rb") as fh:
                summary = summarize_trace(json.load(fh), backend=self.backend, wall_us=wall_us)
            gz = folder / f"{rank_device(self.workload, self.rank)}.pt.trace.json.gz"
            with open(raw, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst)
        finally:
            raw.unlink(missing_ok=True)
        return summary, _kept(gz, gz.stat().st_size, self.max_bytes, self.run_dir)


def _kept(path: Path, size: int, max_bytes: int, run_dir: Path) -> dict[str, Any]:
    if size > max_bytes:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        return {"trace": None, "trace_bytes": size,
                "trace_dropped": f"{size} bytes over the cap of {max_bytes} bytes"}
    return {"trace": str(path.relative_to(run_dir)), "trace_bytes": size, "trace_dropped": None}


def _profiler(backend: str, folder: Path) -> Any:
    if backend == "npu":
        import torch_npu

        p = torch_npu.profiler
        folder.mkdir(parents=True, exist_ok=True)
        return p.profile(activities=[p.ProfilerActivity.CPU, p.ProfilerActivity.NPU],
                         on_trace_ready=p.tensorboard_trace_handler(str(folder)))
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if backend == "cuda" else [])
    return profile(activities=acts)


