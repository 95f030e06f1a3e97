"""``soak run``: one run from plan to verdict.

preflight -> launch the workloads (torchrun, own process group) -> supervise (exit, crash,
hang -> restart with backoff) while the sampler stores telemetry and serves /metrics and the
scheduler runs the online analysis, WAL checkpoints and the disk watch -> at the end the
final analysis, verdict and status.

Threads: the main loop (heartbeats, supervisors, progress), the sampler (samples into a
batching writer), the scheduler (jobs), the exporter. The store serialises their writes.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from soak.clock import ScaledClock
from soak.config import Plan, WorkloadSpec, dump_plan, load_plan, plan_from_dict
from soak.daemon import runfolder, sdnotify
from soak.daemon.heartbeat import HeartbeatFollower, StepAggregator
from soak.daemon.jobs import Jobs, analyze_run, disk_free_bytes, online_bucket_s, run_analysis
from soak.daemon.lock import RunLock
from soak.daemon.metrics import RunCollector
from soak.daemon.status import RankStatus, RunStatus, progress_line
from soak.daemon.supervisor import DONE, GAVE_UP, RestartPolicy, Supervisor
from soak.errors import InputError, StoreError, UserError
from soak.store import Store
from soak.telemetry.records import Snapshot

log = logging.getLogger("soak.daemon")

ArgvFactory = Callable[[WorkloadSpec, Path, int, float], list[str]]


def default_argv(plan: Plan) -> ArgvFactory:
    """torchrun argv of a workload attempt; ``wall_left_s`` bounds the attempt so that an
    orphan of a killed daemon ends by itself near the run's planned end."""
    from soak.workloads.launch import build_command

    device = {"sim": "cpu", "cpu": "cpu", "npu": "npu", "cuda": "cuda"}.get(plan.devices.backend, "auto")

    def argv(w: WorkloadSpec, run_dir: Path, attempt: int, wall_left_s: float) -> list[str]:
        return build_command(w.name, run_dir, w.nproc, w.size, duration_s=max(1.0, wall_left_s + 30.0),
                             inject=plan.faults.inject,
                             extra=("--device-backend", device, *w.extra))

    return argv


class Daemon:
    def __init__(self, plan: Plan, *, resume: str | None = None, out: TextIO | None = None,
                 progress_every_s: float = 5.0, argv_factory: ArgvFactory | None = None,
                 loop_interval_s: float = 0.25, step_window_s: float = 10.0,
                 resume_overrides: dict[str, Any] | None = None) -> None:
        """``resume_overrides``: dotted plan keys a resume may change (``run.db``,
        ``exporter.listen``); the rest of a resumed run's plan is its own ``plan.toml``."""
        self.plan = plan
        self.resume_id = resume
        self.resume_overrides = dict(resume_overrides or {})
        self.out = out if out is not None else sys.stderr
        self.progress_every_s = progress_every_s
        self.argv_factory = argv_factory
        self.loop_interval_s = loop_interval_s
        self.step_window_s = step_window_s
        self.stop_reason: str | None = None
        self.fatal: BaseException | None = None
        self._stop_event = threading.Event()
        self.latest: Snapshot | None = None
        self.status: RunStatus | None = None
        self.findings: list[dict[str, Any]] = []
        self.passing: bool | None = None
        self._next_analysis = 0.0
        self._seen_findings: set[tuple[str, str | None, str | None]] = set()

    # ------------------------------------------------------------------ signals
    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self._stop_event.set()

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda s, _f: self.request_stop(signal.Signals(s).name))

    # ------------------------------------------------------------------ setup
    def _open(self) -> None:
        from soak.daemon.jobs import build_profile

        plan = self.plan
        if not self.resume_id:
            build_profile(plan)  # a bad profile fails before the run folder exists
        if self.resume_id:
            self.run_id = self.resume_id
            self.run_dir = Path(plan.run.data_dir).expanduser() / self.run_id
            if not (self.run_dir / "plan.toml").is_file():
                raise StoreError(f"run {self.run_id}: no run folder with plan.toml under {plan.run.data_dir}")
            saved = load_plan(self.run_dir / "plan.toml").to_dict()
            # the run keeps its own plan; only where things live may be given again
            for dotted, value in self.resume_overrides.items():
                section, key = dotted.split(".")
                saved[section][key] = value
            saved["run"]["data_dir"] = plan.run.data_dir
            self.plan = plan = plan_from_dict(saved)
        else:
            self.run_id = plan.run.id or runfolder.new_run_id()
            self.run_dir = runfolder.make_run_dir(plan.run.data_dir, self.run_id, exist_ok=False)
        self.profile = build_profile(plan)
        self.lock = RunLock(self.run_dir)
        self.lock.acquire()
        self.log_handler = runfolder.setup_logging(self.run_dir)
        url = plan.run.db or str(self.run_dir / "soak.db")
        self.store = Store.open(url)

    def _begin(self) -> None:
        plan = self.plan
        if self.resume_id:
            run = self.store.get_run(self.run_id)
            if run is None:
                raise StoreError(f"run {self.run_id}: not in the store {self.store.url}")
            if run.status != "running":
                raise StoreError(f"run {self.run_id} is {run.status}; only a run whose daemon died can be resumed")
            self.clock = ScaledClock(scale=run.time_scale, origin=run.started_ts)
            self.started_ts = run.started_ts
            self.planned_end_ts = run.planned_end_ts or run.started_ts + plan.run.duration_s
            self.restarts0 = run.restarts
            orphans = runfolder.kill_orphans(self.run_dir, plan.restart.stop_grace_s)
            last = max(x for x in (self.store.last_sample_ts(self.run_id), self._last_event_ts(),
                                   run.started_ts) if x is not None)
            now = self.clock.now()
            self.store.add_event(self.run_id, "gap", ts=last, end_ts=now,
                                 message=f"daemon down {now - last:.0f} s (run time line)",
                                 detail={"start": last, "end": now, "orphans_ended": orphans})
            self.store.add_event(self.run_id, "resume", ts=now, message=f"resumed by pid {os.getpid()}",
                                 detail={"pid": os.getpid(), "restarts_so_far": run.restarts})
        else:
            self.clock = ScaledClock(scale=plan.run.time_scale, origin=time.time())
            self.started_ts = self.clock.now()
            self.planned_end_ts = self.started_ts + plan.run.duration_s
            self.restarts0 = 0
            (self.run_dir / "plan.toml").write_text(dump_plan(plan), encoding="utf-8")
            self.store.create_run(
                self.run_id, host=socket.gethostname(), plan=plan.to_dict(), started_ts=self.started_ts,
                planned_end_ts=self.planned_end_ts, workload=",".join(w.name for w in plan.workloads),
                backend=plan.devices.backend, time_scale=plan.run.time_scale, run_dir=str(self.run_dir),
            )
            self.store.add_event(self.run_id, "start", ts=self.started_ts,
                                 message=f"run started: {self._workload_label()} for {plan.run.duration_s:.0f} s",
                                 detail={"pid": os.getpid(), "time_scale": plan.run.time_scale})

    def _last_event_ts(self) -> float | None:
        ev = self.store.load_events(self.run_id)
        return max((e.end_ts or e.ts for e in ev), default=None)

    def _workload_label(self) -> str:
        return ",".join(f"{w.name}x{w.nproc}" for w in self.plan.workloads)

    def _manifest(self) -> None:
        try:
            from soak.manifest import collect_manifest
        except ImportError:
            return
        try:
            self.store.update_run(self.run_id, manifest=collect_manifest(npu_smi=self.npu_smi or "npu-smi"))
        except UserError:
            raise
        except Exception as exc:  # the manifest documents the run; it must not stop it
            log.warning("manifest: %s", exc)
            self.store.add_event(self.run_id, "note", ts=self.clock.now(), message=f"manifest failed: {exc}")

    def _preflight(self) -> None:
        """``soak preflight`` in a child process: torch and the device checks stay out of the
        daemon (its memory stays small for 72 h), and a check that crashes cannot take it down."""
        import json
        import subprocess

        backend = {"sim": "cpu"}.get(self.plan.devices.backend, self.plan.devices.backend)
        argv = [sys.executable, "-m", "soak", "preflight", "--backend", backend, "--run-dir",
                str(self.run_dir), "--format", "json"]
        if self.npu_smi:
            argv += ["--npu-smi", self.npu_smi]
        t0 = self.clock.now()
        self.out.write("soak: preflight ...\n")
        self.out.flush()
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
            detail = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {
                "status": "error", "error": (r.stderr.strip().splitlines() or ["no output"])[-1]}
        except (OSError, subprocess.TimeoutExpired) as exc:
            detail = {"status": "error", "error": str(exc)}
        status = str(detail.get("status"))
        failed = [c.get("name") for c in detail.get("checks", []) if c.get("status") == "fail"]
        msg = f"preflight {status}" + (f": failed {', '.join(map(str, failed))}" if failed else "")
        self.store.add_event(self.run_id, "preflight", ts=t0, end_ts=self.clock.now(), message=msg, detail=detail)
        self.out.write(f"soak: {msg}\n")
        self.out.flush()

    # ------------------------------------------------------------------ sinks, jobs
    def _sample_sink(self, snapshot: Snapshot) -> None:
        self.latest = snapshot
        try:
            self.writer.add(snapshot)
        except StoreError as exc:
            self.fatal = exc
            self.request_stop("store")

    def _event(self, kind: str, message: str, detail: dict[str, Any], *, workload: str | None = None,
               rank: int | None = None, ts: float | None = None) -> None:
        self.store.add_event(self.run_id, kind, ts=self.clock.now() if ts is None else ts,
                             workload=workload, rank=rank, message=message, detail=detail)
        if kind in ("crash", "hang", "restart", "stop"):
            self.out.write(f"soak: {message}\n")
            self.out.flush()

    def _analysis_job(self) -> None:
        # The trace grows all run long; keep the online analysis under ~2 % of a core by
        # spacing runs at least 50x their own duration apart (the final one always runs).
        if time.monotonic() < self._next_analysis:
            return
        t0 = time.monotonic()
        now = self.clock.now()
        findings, verdict = analyze_run(self.store, self.run_id, self.plan, now=now, profile=self.profile,
                                        bucket_s=online_bucket_s(self.plan, now - self.started_ts))
        self._next_analysis = time.monotonic() + 49 * (time.monotonic() - t0)
        if verdict is None:
            return
        self.store.replace_findings(self.run_id, findings)
        now = self.clock.now()
        for f in findings:
            key = (f["kind"], f.get("device"), f.get("metric"))
            if key not in self._seen_findings:
                self._seen_findings.add(key)
                self.store.add_event(self.run_id, "finding", ts=now, message=f.get("summary"),
                                     detail={k: f.get(k) for k in ("kind", "device", "metric", "severity", "start", "end")})
        self.findings = findings
        self.passing = verdict == "pass"

    def _disk_job(self) -> None:
        free = disk_free_bytes(self.run_dir)
        if free < self.plan.jobs.min_free_bytes:
            msg = f"only {free / 2**20:.0f} MiB free on the run folder's disk; stopping before it fills"
            log.error(msg)
            self.disk_message = f"{self.run_dir}: {msg} (run {self.run_id} stopped, its data kept)"
            self.store.add_event(self.run_id, "disk", ts=self.clock.now(), message=msg, detail={"free_bytes": free})
            self.request_stop("disk")

    # ------------------------------------------------------------------ status
    def _status(self) -> RunStatus:
        now = self.clock.now()
        ranks = tuple(
            RankStatus(s.workload, s.rank, s.step, s.step_time_s, s.tokens_per_s,
                       None if s.last_hb_ts is None else self.clock.to_scaled(s.last_hb_ts))
            for _, s in sorted(self.agg.ranks.items())
        )
        counts: dict[tuple[str, str], int] = {}
        for f in self.findings:
            key = (str(f["kind"]), str(f.get("severity")))
            counts[key] = counts.get(key, 0) + 1
        verdict = "running" if self.passing is None or self.stop_reason is None else ("pass" if self.passing else "fail")
        return RunStatus(
            run_id=self.run_id, workload=self._workload_label(), verdict=verdict,
            elapsed_s=max(0.0, now - self.started_ts), remaining_s=max(0.0, self.planned_end_ts - now),
            restarts=self._restarts(),
            ranks=ranks, findings=counts, passing=self.passing,
        )

    # ------------------------------------------------------------------ the run
    def run(self) -> int:
        if not self.resume_id and self.plan is not None and self.plan.exporter.listen:
            # A taken port is found before a run folder or a store row exists: a mistake in
            # the flags must not leave a failed run behind.
            _check_listen(self.plan.exporter.listen)
        try:
            self._open()
        except BaseException:
            self._close_partial()
            raise
        try:
            return self._run_locked()
        finally:
            self.store.close()
            runfolder.teardown_logging(self.log_handler)
            self.lock.release()

    def _close_partial(self) -> None:
        if getattr(self, "store", None) is not None:
            self.store.close()
        if getattr(self, "log_handler", None) is not None:
            runfolder.teardown_logging(self.log_handler)
        if getattr(self, "lock", None) is not None:
            self.lock.release()

    def _run_locked(self) -> int:
        from soak.daemon import telemetry

        self._begin()
        plan = self.plan
        self.supervisors: list[Supervisor] = []
        self.backend = telemetry.make_backend(plan, self.run_dir, self.clock,
                                              pid_provider=lambda: [s.pid for s in self.supervisors if s.pid])
        self.npu_smi = plan.devices.npu_smi
        if hasattr(self.backend, "sim_dir"):
            self.npu_smi = str(Path(self.backend.sim_dir) / "npu-smi")
        if not self.resume_id:
            self._manifest()
            if plan.run.preflight:
                self._preflight()
                # the soak's duration counts from the workloads' start, not the self-check's
                self.planned_end_ts = self.clock.now() + plan.run.duration_s
                self.store.update_run(self.run_id, planned_end_ts=self.planned_end_ts)
        self.agg = StepAggregator(self.step_window_s, to_ts=self.clock.to_scaled,
                                  attempt=lambda w: self._sup(w).attempt if self._sup(w) else 1)
        self.follower = HeartbeatFollower(self.run_dir / "heartbeats")
        if self.resume_id:
            self.follower.skip_existing()
        self.writer = self.store.writer(self.run_id, max_rows=4096, max_delay_s=plan.sampling.flush_every_s)
        policy = RestartPolicy(plan.restart.max_restarts, plan.restart.backoff_initial_s,
                               plan.restart.backoff_max_s, plan.restart.hang_timeout_s, plan.restart.stop_grace_s)
        argv_factory = self.argv_factory or default_argv(plan)
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        per_workload_restart_budget = self.restarts0
        for w in plan.workloads:
            def argv_for(attempt: int, w: WorkloadSpec = w) -> list[str]:
                wall_left = self.clock.wall_seconds(self.planned_end_ts - self.clock.now())
                return argv_factory(w, self.run_dir, attempt, wall_left)

            self.supervisors.append(Supervisor(
                w.name, argv_for, self.run_dir / "logs", policy, progress=self.agg.min_progress,
                emit=lambda kind, msg, detail, name=w.name: self._event(kind, msg, detail, workload=name),
                env=env, restarts=per_workload_restart_budget,
            ))
            per_workload_restart_budget = 0  # restarts so far are counted once, on the first

        sampler = telemetry.make_sampler(self.backend, plan.sampling.interval_s, [self._sample_sink], self.clock)
        exporter = None
        wd_every = sdnotify.watchdog_interval_s()
        jobs = Jobs(plan, analysis=self._analysis_job, wal_checkpoint=self.store.checkpoint_wal,
                    disk_check=self._disk_job, watchdog=(lambda: sdnotify.notify("WATCHDOG=1")) if wd_every else None,
                    watchdog_every_s=wd_every)
        self._install_signals()
        status = "finished"
        try:
            if plan.exporter.listen:
                exporter = telemetry.start_exporter(plan.exporter.listen, sampler,
                                                    RunCollector(lambda: self.status))
            sampler.start()
            jobs.start()
            self._disk_job()
            for s in self.supervisors:
                s.tick()
            runfolder.write_children(self.run_dir, [s.pid for s in self.supervisors if s.pid])
            sdnotify.notify("READY=1", f"STATUS=run {self.run_id} started")
            status = self._loop()
        except UserError as exc:  # store unwritable, port taken: end the run cleanly, one line
            self.fatal = exc
            status = "failed"
        finally:
            for s in self.supervisors:
                s.stop()
            _stop_quietly(sampler.stop)
            jobs.shutdown()
            if exporter is not None:
                _stop_quietly(exporter.stop)
            _stop_quietly(self.backend.close)
        return self._finish(status)

    def _restarts(self) -> int:
        # the first supervisor carries the restarts of earlier daemons of this run
        return sum(s.restarts for s in getattr(self, "supervisors", []))

    def _sup(self, name: str) -> Supervisor | None:
        for s in getattr(self, "supervisors", []):
            if s.name == name:
                return s
        return None

    def _loop(self) -> str:
        last_progress = 0.0
        while True:
            self._drain_heartbeats(time.time())
            pids_before = [s.pid for s in self.supervisors]
            states = [s.tick() for s in self.supervisors]
            if [s.pid for s in self.supervisors] != pids_before:
                runfolder.write_children(self.run_dir, [s.pid for s in self.supervisors if s.pid])
                self.store.update_run(self.run_id, restarts=self._restarts())
            self.status = self._status()
            now_mono = time.monotonic()
            if now_mono - last_progress >= self.progress_every_s:
                last_progress = now_mono
                line = progress_line(self.status)
                self.out.write(line + "\n")
                self.out.flush()
                sdnotify.notify(f"STATUS={line}")
            if self.fatal is not None:
                return "failed"
            if self.stop_reason is not None:
                return "stopped"
            if any(st == GAVE_UP for st in states):
                return "failed"
            if all(st == DONE for st in states):
                return "finished"
            if self.clock.now() >= self.planned_end_ts:
                return "finished"
            self._stop_event.wait(self.loop_interval_s)

    def _drain_heartbeats(self, now_wall: float | None) -> None:
        records = self.follower.poll()
        rows, events = self.agg.feed(records)
        rows += self.agg.flush(now_wall)
        if rows:
            self.store.add_steps(self.run_id, rows)
        for e in events:
            self.store.add_event(self.run_id, e["kind"], ts=e["ts"], workload=e["workload"], rank=e["rank"],
                                 message=e["message"], detail=e["detail"])

    def _finish(self, status: str) -> int:
        end = self.clock.now()
        fatal = self.fatal
        verdict: str | None = None
        try:
            self.writer.flush()
            self._drain_heartbeats(None)
            if status == "stopped":
                self.store.add_event(self.run_id, "stop", ts=end, message=f"stopped ({self.stop_reason})",
                                     detail={"reason": self.stop_reason})
            self.store.update_run(self.run_id, restarts=self._restarts())
            result = None
            try:
                result = run_analysis(self.store, self.run_id, self.plan, profile=self.profile)
                findings = [] if result is None else [f.to_dict() for f in result.findings]
                verdict = None if result is None else result.verdict
                self.store.replace_findings(self.run_id, findings)
                self.findings = findings
            except UserError:
                raise
            except Exception:
                log.exception("final analysis")
                result, verdict = None, None
            if status == "failed":
                verdict = "fail"
            elif status == "stopped" and verdict == "pass":
                # Stopped before its planned end: what was seen may fail it, but a clean stretch
                # shorter than planned proves nothing the customer asked for.
                verdict = None
            self.store.finish_run(self.run_id, status=status, ended_ts=end, verdict=verdict)
            self.store.checkpoint_wal()
            if result is not None:
                self._save_analysis(result.to_dict(), status, verdict)
        except StoreError as exc:
            fatal = fatal or exc
        sdnotify.notify("STOPPING=1", f"STATUS=run {self.run_id} {status}")
        if fatal is not None:
            log.error("%s", fatal)
            raise StoreError(str(fatal)) from None
        n = len(self.findings)
        self.out.write(f"soak: run {self.run_id} {status}, verdict {verdict or 'N/A'}, {n} findings "
                       f"(soak runs show {self.run_id})\n")
        self.out.flush()
        if self.stop_reason == "disk":
            raise StoreError(self.disk_message)
        return 1 if (status == "failed" or verdict == "fail") else 0


    def _save_analysis(self, analysis: dict[str, Any], status: str, verdict: str | None) -> None:
        """The final analysis for the report, with the verdict the run record carries: a run
        that failed (restarts exhausted, a fatal error) fails whatever its telemetry says."""
        analysis = dict(analysis)
        analysis.update(run_id=self.run_id, status=status)
        if verdict is not None and verdict != analysis.get("verdict"):
            analysis["verdict"] = verdict
            analysis["reasons"] = [*analysis.get("reasons", []),
                                   f"run {status}: {self.fatal or 'the workloads stopped before the planned end'}"]
            analysis.pop("clean_statement", None)
        try:
            runfolder.write_analysis(self.run_dir, analysis)
        except OSError as exc:  # the report re-runs the analysis from the store instead
            log.error("could not save the final analysis in %s: %s", self.run_dir, exc.strerror or exc)


def _stop_quietly(fn: Callable[[], Any] | None) -> None:
    if fn is None:
        return
    try:
        fn()
    except Exception:
        log.exception("stopping")


def _check_listen(listen: str) -> None:
    """Raise the exporter's one-line InputError if ``listen`` cannot be bound right now."""
    from exporters.server import parse_listen

    host, port = parse_listen(listen)
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise InputError(f"--listen {listen}: cannot listen ({exc.strerror or exc})") from None
