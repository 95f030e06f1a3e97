"""Following the workloads' heartbeat files and folding them into step rows and events.

The follower keeps one byte offset per file and only ever consumes complete lines, so a
half-written line is read on the next poll, and memory stays bounded however long the run:
each poll reads at most ``max_bytes`` per file, and the aggregator holds at most one window
of step times per rank.
"""

from __future__ import annotations

import json
import logging
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.analysis import numerics as nm
from soak.device_names import rank_device

log = logging.getLogger("soak.daemon")

# heartbeat event -> store event kind
EVENT_KINDS = {
    "checkpoint": "checkpoint",
    "resume": "resume",
    "timeout": "comm_timeout",
    "inject": "inject",
    "start": "start",
    "exit": "exit",
    "eval": "phase",
    "sdc_mismatch": "sdc",
    "nonfinite": "nonfinite",
    "loss_spike": "loss_spike",
    "alignment": "alignment",
    "capture": "capture",
    "link_test": "link_test",
    "data_stall": "data_stall",
}
# the numerical events' own fields, kept in the stored event's detail as written
NUMERIC_FIELDS = ("check", "error", "tolerance", "suspect_rank", "classification", "what", "value", "loss",
                  "median", "multiple", "steps", "max_rel_diff", "device_losses", "reference_losses")
_SAID_NULL = ("error", "tolerance", "suspect_rank", "classification")  # null says something: kept
_MAX_WINDOW_LINES = 1000
_HB_FILE = re.compile(r"^(.+)-rank(\d+)\.jsonl$")


def _offset_after(path: Path, cut: float, to_ts: Callable[[float], float]) -> int:
    """A line start in ``path`` before which every line's ``to_ts(ts)`` is at most ``cut``.

    The file is in time order (one writer appending), so a binary search finds it in a few
    reads however long the run; it stops at the first line it cannot read, which only makes
    the offset earlier (the lines read again are dropped by their time stamps)."""
    lo, hi = 0, path.stat().st_size
    with open(path, "rb") as fh:
        while hi - lo > 1 << 16:
            mid = (lo + hi) // 2
            fh.seek(mid)
            fh.readline()  # to the next line start
            start = fh.tell()
            line = fh.readline()
            if start >= hi or not line.endswith(b"\n"):
                hi = mid
                continue
            try:
                ts = float(json.loads(line)["ts"])
            except (ValueError, KeyError, TypeError):
                break
            if to_ts(ts) <= cut:
                lo = start + len(line)
            else:
                hi = mid
    return lo


def _rank_settings(message: Any) -> dict[str, Any]:
    """A rank's start line writes its settings as a JSON record in its message (model size,
    ranks, the faults it plans to inject): kept as values, so a report says them in words in
    every language instead of showing the record."""
    try:
        rec = json.loads(message) if isinstance(message, str) else None
    except ValueError:
        return {}
    if not isinstance(rec, dict) or not isinstance(rec.get("size"), str) or not isinstance(rec.get("world_size"), int):
        return {}
    inject = rec.get("inject")
    planned = [str(x) for x in inject] if isinstance(inject, list) else []
    return {"model_size": rec["size"], "world_size": rec["world_size"], "inject_planned": planned}


class HeartbeatFollower:
    """Reads new complete lines from ``heartbeats/*.jsonl``; offsets survive between polls."""

    def __init__(self, directory: Path, max_bytes: int = 1 << 20) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.offsets: dict[str, int] = {}
        self.bad_lines = 0
        self._stored: dict[tuple[str, int], tuple[float | None, float | None]] = {}
        self._to_ts: Callable[[float], float] = float

    def skip_existing(self) -> None:
        """Start at the end of every file."""
        for path in sorted(self.directory.glob("*.jsonl")):
            self.offsets[path.name] = path.stat().st_size

    def resume_after(self, marks: dict[tuple[str, int], tuple[float | None, float | None]],
                     to_ts: Callable[[float], float]) -> None:
        """Read on from where the store stopped (used on resume).

        ``marks``: per (workload, rank), the run-time ``ts`` of the last step row and of the
        last heartbeat event the store holds (``Store.heartbeat_marks``); ``to_ts`` maps a
        heartbeat's wall ``ts`` onto the run's time line. The steps of the last open window
        before the daemon died were never stored (and an orphaned workload, where nothing
        tied it to its daemon, went on stepping): those lines are read again, the ones
        already stored are dropped.
        """
        self._stored = dict(marks)
        self._to_ts = to_ts
        for path in sorted(self.directory.glob("*.jsonl")):
            m = _HB_FILE.match(path.name)
            mark = self._stored.get((m.group(1), int(m.group(2)))) if m else None
            if mark is None:  # nothing of this rank stored yet: read it all
                continue
            cut = min(t for t in mark if t is not None) if any(t is not None for t in mark) else None
            if cut is not None:
                self.offsets[path.name] = _offset_after(path, cut, to_ts)

    def _already_stored(self, rec: dict[str, Any]) -> bool:
        try:
            mark = self._stored.get((str(rec["workload"]), int(rec["rank"])))
            if mark is None:
                return False
            cut = mark[0] if rec.get("event") == "step" else mark[1]
            return cut is not None and self._to_ts(float(rec["ts"])) <= cut
        except (KeyError, TypeError, ValueError):
            return False

    def poll(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if not self.directory.is_dir():
            return out
        for path in sorted(self.directory.glob("*.jsonl")):
            offset = self.offsets.get(path.name, 0)
            try:
                size = path.stat().st_size
                if size < offset:  # truncated or replaced: start over
                    offset = 0
                if size == offset:
                    continue
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read(self.max_bytes)
            except OSError as exc:
                log.warning("heartbeat %s: %s", path.name, exc)
                continue
            end = chunk.rfind(b"\n")
            if end < 0:
                if len(chunk) >= self.max_bytes:  # one absurd line: skip it rather than stall
                    self.offsets[path.name] = offset + len(chunk)
                    self.bad_lines += 1
                continue
            self.offsets[path.name] = offset + end + 1
            for line in chunk[: end + 1].splitlines():
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    self.bad_lines += 1
                    continue
                if isinstance(rec, dict):
                    if not (self._stored and self._already_stored(rec)):
                        out.append(rec)
                else:
                    self.bad_lines += 1
        return out


@dataclass
class RankState:
    """What the daemon knows about one rank, for metrics, progress and hang detection."""

    workload: str
    rank: int
    step: int = 0
    last_hb_ts: float | None = None  # wall
    last_progress_wall: float | None = None  # wall time the step last moved forward
    step_time_s: float | None = None
    compute_s: float | None = None  # of the last step: outside the collectives
    tokens_per_s: float | None = None
    loss: float | None = None
    device: str | None = None  # the rank's torch device as it wrote it (``npu:3``, ``cpu``)
    numeric_checks: int | None = None  # cumulative: numerical checks this rank ran
    # the current aggregation window
    window_start: float | None = None
    times: list[float] = field(default_factory=list)
    compute: list[float] = field(default_factory=list)
    pending: dict[str, Any] = field(default_factory=dict)
    n: int = 0


class StepAggregator:
    """Folds step lines into at most one row per rank per ``window_s`` (wall) seconds.

    ``to_ts`` maps a heartbeat's wall ``ts`` onto the run's time line (ScaledClock).
    """

    def __init__(self, window_s: float = 10.0, to_ts: Callable[[float], float] = float,
                 attempt: Callable[[str], int] = lambda _w: 1,
                 place: Callable[[str, int, str | None], tuple[str | None, str | None]] | None = None) -> None:
        self.window_s = window_s
        self.to_ts = to_ts
        self.attempt = attempt
        # (workload, rank, its torch device) -> (chip, serial): where a numerical event's
        # suspect rank computed (``soak.analysis.numerics.chip_of_rank``); None: not known
        self.place = place
        self.ranks: dict[tuple[str, int], RankState] = {}
        self.numerics = nm.Severities()

    def rank_state(self, workload: str, rank: int) -> RankState:
        key = (workload, rank)
        if key not in self.ranks:
            self.ranks[key] = RankState(workload, rank)
        return self.ranks[key]

    def feed(self, records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Returns (finished step rows, events) for these heartbeat records."""
        rows: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        for rec in records:
            try:
                workload = str(rec["workload"])
                rank = int(rec["rank"])
                ts = float(rec["ts"])
                step = int(rec.get("step") or 0)
            except (KeyError, TypeError, ValueError):
                continue
            st = self.rank_state(workload, rank)
            st.last_hb_ts = ts
            if rec.get("device") is not None:
                st.device = str(rec["device"])
            if step > st.step or st.last_progress_wall is None:
                st.last_progress_wall = ts
            st.step = max(st.step, step) if rec.get("event") != "resume" else step
            ev = rec.get("event")
            if ev == "step":
                if st.window_start is not None and ts - st.window_start >= self.window_s:
                    rows.append(self._close(st))
                if st.window_start is None:
                    st.window_start = ts
                    st.pending["attempt"] = self.attempt(workload)
                if rec.get("step_time_s") is not None and len(st.times) < _MAX_WINDOW_LINES:
                    st.times.append(float(rec["step_time_s"]))
                if rec.get("compute_s") is not None and len(st.compute) < _MAX_WINDOW_LINES:
                    st.compute.append(float(rec["compute_s"]))
                st.n += 1
                for k in ("loss", "tokens_per_s", "tflops", "host_rss_bytes", "comm_timeouts",
                          "mem_allocated_bytes", "mem_reserved_bytes", "numeric_checks"):
                    if rec.get(k) is not None:
                        st.pending[k] = rec[k]
                if rec.get("mem_peak_bytes") is not None:
                    st.pending["mem_peak_bytes"] = max(rec["mem_peak_bytes"], st.pending.get("mem_peak_bytes") or 0)
                st.pending["ts"] = ts
                st.pending["step"] = step
                st.step_time_s = rec.get("step_time_s")
                st.compute_s = rec.get("compute_s")
                st.tokens_per_s = rec.get("tokens_per_s")
                st.loss = rec.get("loss")
                if rec.get("numeric_checks") is not None:
                    st.numeric_checks = int(rec["numeric_checks"])
            elif ev in EVENT_KINDS:
                if ev in ("start", "resume") and st.n:
                    rows.append(self._close(st))  # a new attempt: never mix two in one row
                # ``seconds``: how long a checkpoint, link test or data stall kept the job from
                # stepping, up to this line's time (wall seconds); ``injected``: the plan's own
                detail = {k: rec[k] for k in ("step", "phase", "comm_timeouts", "device", "seconds", "injected")
                          if rec.get(k) is not None}
                if ev == "capture" and isinstance(rec.get("capture"), dict):
                    detail.update(rec["capture"])  # the capture's summary (soak.analysis.captures)
                if ev == "link_test" and isinstance(rec.get("link_test"), dict):
                    detail.update(rec["link_test"])  # the pairs (soak.analysis.links)
                if isinstance(rec.get("inject"), dict):
                    detail["inject"] = rec["inject"]  # the plan's fault and what it did (its message's values)
                if ev == "start":
                    detail.update(_rank_settings(rec.get("message")))
                if ev in nm.HEARTBEAT_EVENTS:
                    detail.update({k: rec.get(k) for k in NUMERIC_FIELDS if rec.get(k) is not None or k in _SAID_NULL})
                    detail.update(self._numeric_place(workload, rank, detail))
                events.append({
                    "kind": EVENT_KINDS[ev], "ts": self.to_ts(ts), "workload": workload, "rank": rank,
                    "message": rec.get("message"), "detail": {**detail, "heartbeat_event": ev},
                })
        return rows, events

    def _numeric_place(self, workload: str, rank: int, detail: dict[str, Any]) -> dict[str, Any]:
        """A numerical event's chip, serial and severity: the suspect rank's chip where a rank
        is suspected (``soak.analysis.numerics``), none named where nobody is."""
        suspect = detail.get("suspect_rank")
        chip = serial = None
        if isinstance(suspect, int) and self.place is not None:
            other = self.ranks.get((workload, suspect))
            chip, serial = self.place(workload, suspect, other.device if other else None)
        severity = self.numerics.judge(detail, chip or (rank_device(workload, suspect) if isinstance(suspect, int) else None))
        return {"chip": chip, "serial": serial, "severity": severity}

    def _close(self, st: RankState) -> dict[str, Any]:
        p = st.pending
        row = {
            "ts": self.to_ts(float(p.get("ts", st.window_start or 0.0))),
            "workload": st.workload,
            "rank": st.rank,
            "step": int(p.get("step", st.step)),
            "n_steps": st.n,
            "step_time_s": statistics.median(st.times) if st.times else None,
            "compute_s": statistics.median(st.compute) if st.compute else None,
            "attempt": p.get("attempt"),
            **{k: p.get(k) for k in ("loss", "tokens_per_s", "tflops", "mem_allocated_bytes",
                                     "mem_reserved_bytes", "mem_peak_bytes", "host_rss_bytes",
                                     "comm_timeouts", "numeric_checks")},
        }
        st.window_start = None
        st.times = []
        st.compute = []
        st.pending = {}
        st.n = 0
        return row

    def flush(self, now_wall: float | None = None) -> list[dict[str, Any]]:
        """Close windows that are due at ``now_wall`` (all of them when None)."""
        rows = []
        for st in self.ranks.values():
            if st.window_start is None or not st.n:
                continue
            if now_wall is None or now_wall - st.window_start >= self.window_s:
                rows.append(self._close(st))
        return rows

    def last_progress(self, workload: str) -> float | None:
        """The latest wall time any rank of ``workload`` moved its step forward."""
        times = [s.last_progress_wall for (w, _), s in self.ranks.items()
                 if w == workload and s.last_progress_wall is not None]
        return max(times) if times else None

    def min_progress(self, workload: str) -> float | None:
        """The earliest 'last progress' among the ranks: one stuck rank hangs a job."""
        times = [s.last_progress_wall for (w, _), s in self.ranks.items()
                 if w == workload and s.last_progress_wall is not None]
        return min(times) if times else None
