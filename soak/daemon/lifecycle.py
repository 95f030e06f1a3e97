"""``soak run``: one run from plan to verdict.

preflight -> launch the workloads (torchrun, own process group) -> supervise (exit, crash,
hang -> restart with backoff) while the sampler stores telemetry and serves /metrics and the
scheduler runs the online analysis, WAL checkpoints and the disk watch -> at the end the
final analysis, verdict and status.

Threads: the main loop (heartbeats, supervisors, progress), the sampler (samples into a
batching writer), the scheduler (jobs), the exporter. The store serialises their writes.

``Daemon`` is that sequence and the main loop; its parts stand beside it in this package:
the agent's part in the run, alone or as one node of a cluster run (``membership``,
``cluster``), the manifest and preflight (``prepare``), the workloads' command (``launch``),
the online analysis (``online``), reader outages (``outages``), the run folder's disk
(``disk``) and the final analysis (``final``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from soak import runfolder as layout
from soak.analysis import numerics, sampling
from soak.analysis.device_faults import FaultChange, FaultWatch
from soak.analysis.messages import hm
from soak.clock import ScaledClock
from soak.config import Plan, WorkloadSpec, load_plan, plan_from_dict, recorded_plan
from soak.daemon import burnin, runfolder, sdnotify
from soak.daemon.cluster import ClusterMembership
from soak.daemon.console import Console
from soak.daemon.disk import DiskWatch
from soak.daemon.final import judge_final
from soak.daemon.heartbeat import EVENT_KINDS, HeartbeatFollower, StepAggregator
from soak.daemon.jobs import Jobs, analysis_period_s
from soak.daemon.launch import ArgvFactory, default_argv
from soak.daemon.lock import RunLock
from soak.daemon.membership import Membership, SingleNode
from soak.daemon.metrics import RunCollector
from soak.daemon.online import Found, OnlineAnalysis
from soak.daemon.outages import Outage, ReaderOutages
from soak.daemon.prepare import record_manifest, run_preflight
from soak.daemon.spool import StoreSpool, replay_file
from soak.daemon.started import StartedRun
from soak.daemon.status import (
    OpenFinding,
    RankStatus,
    RunStatus,
    duration_words,
    ended_lines,
    progress_line,
    workload_words,
)
from soak.daemon.supervisor import DONE, GAVE_UP, RestartPolicy, Supervisor
from soak.device_names import rank_device
from soak.errors import StoreError, UnknownRun, UserError, redact
from soak.faultcodes import load_table
from soak.judge import fault_read_interval_s, withdrawn_findings
from soak.runplan import build_profile, plan_of
from soak.store import Store
from soak.telemetry.records import Snapshot

log = logging.getLogger("soak.daemon")


class Daemon:
    def __init__(self, plan: Plan, *, resume: str | None = None, out: TextIO | Console | None = None,
                 progress_every_s: float = 5.0, argv_factory: ArgvFactory | None = None,
                 loop_interval_s: float = 0.25, step_window_s: float = sampling.STEP_WINDOW_S,
                 resume_overrides: dict[str, Any] | None = None) -> None:
        """``resume_overrides``: dotted plan keys a resume may change (``run.db``,
        ``exporter.listen``); the rest of a resumed run's plan is its own ``plan.toml``.
        ``out``: the terminal (default stderr), whose loss never ends the run (``Console``)."""
        self.plan = plan
        self.resume_id = resume
        self.resume_overrides = dict(resume_overrides or {})
        self.out = out if isinstance(out, Console) else Console(out if out is not None else sys.stderr)
        self.progress_every_s = progress_every_s
        self.argv_factory = argv_factory
        self.loop_interval_s = loop_interval_s
        self.step_window_s = step_window_s
        self.stop_reason: str | None = None
        self.fatal: BaseException | None = None
        self._stop_event = threading.Event()
        # set up by run(): the folder's lock and log, the store, then the started run
        self.lock: RunLock | None = None
        self.log_handler: logging.Handler | None = None
        self._store: Store | None = None
        self.started: StartedRun | None = None
        self.supervisors: list[Supervisor] = []
        self.npu_smi: str | None = plan.devices.npu_smi if plan is not None else None
        # a single node until the run begins as one node of a cluster run (_begin)
        self.membership: Membership = SingleNode()
        self.outages = ReaderOutages()
        self.fault_watch: FaultWatch | None = None  # made with the run's fault-code table (_begin)
        self._faults_said: set[tuple[str, str, str | None]] = set()
        # the workloads' numerical checks: counted and opened as their events are stored, and
        # the chips (key -> serial) of the latest reading, on which a suspect rank is placed
        self.numerics = numerics.NumericTally()
        self._chips: dict[str, str | None] = {}
        self.chips_read: int | None = None  # chips in the latest snapshot (cluster status)
        self.readings_taken = 0  # ticks with a chip read, by this process: what the store must hold
        self.status: RunStatus | None = None
        self.online = OnlineAnalysis(self.out)
        self.findings: list[dict[str, Any]] = []
        self.passing: bool | None = None
        self.found: Found | None = None  # the latest online analysis, for /metrics
        self._spool: StoreSpool | None = None

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
    def _open(self) -> tuple[str, Path, Store]:
        """The run folder, its lock, its log and its store (the run is not started yet)."""
        plan = self.plan
        if self.resume_id:
            run_id = self.resume_id
            run_dir = layout.run_dir(plan.run.data_dir, run_id)
            if not layout.plan_path(run_dir).is_file():
                raise UnknownRun(f"run {run_id}: no run folder with plan.toml under {plan.run.data_dir}",
                                 data_dir=plan.run.data_dir)
            saved = load_plan(layout.plan_path(run_dir)).to_dict()
            # the run keeps its own plan; only where things live may be given again
            for dotted, value in self.resume_overrides.items():
                section, key = dotted.split(".")
                saved[section][key] = value
            saved["run"]["data_dir"] = plan.run.data_dir
            self.plan = plan = plan_from_dict(saved)
            # a sub-folder removed while the daemon was down (logs/ cleaned up) is made again
            runfolder.make_run_dir(plan.run.data_dir, run_id, exist_ok=True)
            runfolder.seal_plan(run_dir)
        else:
            build_profile(plan)  # a bad profile fails before the run folder exists
            run_id = plan.run.id or layout.new_run_id()
            run_dir = runfolder.make_run_dir(plan.run.data_dir, run_id, exist_ok=False)
        self.lock = RunLock(run_dir)
        self.lock.acquire()
        self.log_handler = runfolder.setup_logging(run_dir)
        self._store = Store.open(plan.run.db or str(layout.db_path(run_dir)))
        return run_id, run_dir, self._store

    def _begin(self, run_id: str, run_dir: Path, store: Store) -> StartedRun:
        plan = self.plan
        profile = build_profile(plan)
        if self.resume_id:
            run = store.get_run(run_id)
            if run is None:
                raise UnknownRun.not_in_store(run_id, store.url)
            if run.status != "running":
                raise StoreError(f"run {run_id} is {run.status}; only a run whose daemon died can be resumed")
            spooled = layout.store_spool_path(run_dir)
            if spooled.exists():  # what the last daemon could not write goes first, in order
                n = replay_file(store, run_id, spooled)
                log.warning("resuming run %s: %d spooled records written to the store", run_id, n)
                self.out.write(f"soak: {n} records the store missed written from {spooled}\n")
                self.out.flush()
            clock = ScaledClock.of_run(run)
            orphans = runfolder.kill_orphans(run_dir, plan.restart.stop_grace_s)
            self.membership = self._membership(store, run_id)
            self.membership.resume()
            node = self.membership.node
            # the daemon was down from its last reading (events such as findings may be
            # stamped later than the data they describe)
            last = store.last_sample_ts(run_id, node=node)
            if last is None:
                last = max((e.end_ts or e.ts for e in store.load_events(run_id)), default=run.started_ts)
            now = clock.now()
            store.add_event(run_id, "gap", ts=last, end_ts=now, node=node,
                            message=f"daemon down {now - last:.0f} s (run time line)"
                            + (f" on node {node}" if node else ""),
                            detail={"start": last, "end": now, "orphans_ended": orphans})
            log.warning("resuming run %s: daemon was down %.0f s (run time line)", run_id, now - last)
            store.add_event(run_id, "resume", ts=now, message=f"resumed by pid {os.getpid()}", node=node,
                            detail={"pid": os.getpid(), "restarts_so_far": run.restarts})
            # the burn-in clock may have moved the run's end, and the plan's duration with it:
            # the run row has both (a cluster node's plan.toml keeps the plan it joined with,
            # whose digest a join checks)
            stored = plan_of(run)
            if stored is not None and stored.run.duration_s != plan.run.duration_s:
                self.plan = plan = replace(plan, run=replace(plan.run, duration_s=stored.run.duration_s))
            return StartedRun(run_id, run_dir, plan, profile, store, clock, run.started_ts,
                              run.planned_end_ts or run.started_ts + plan.run.duration_s, run.restarts, True)
        self.membership = self._membership(store, run_id)
        return self.membership.start(plan, run_id, run_dir, store, profile)

    def _membership(self, store: Store, run_id: str) -> Membership:
        """This agent's part in the run: one node of a cluster run where the plan has more
        than one node (its name and rank checked here), else the whole run."""
        if self.plan.cluster.nodes > 1:
            return ClusterMembership.of_plan(self.plan, store, run_id, out=self.out, step_window_s=self.step_window_s)
        return SingleNode()

    @property
    def spool(self) -> StoreSpool:
        """The one path of the started run's store writes; it rides out a store outage."""
        if self._spool is None:
            run = self.started
            self._spool = StoreSpool(run.store, run.run_id, layout.store_spool_path(run.run_dir),
                                     node=self.membership.node, now=run.clock.now,
                                     outage_max_s=self.plan.cluster.store_outage_max_s)
        return self._spool

    def _workload_label(self) -> str:
        return ",".join(f"{w.name}x{w.nproc}" for w in self.plan.workloads)

    # ------------------------------------------------------------------ sinks, jobs
    def _sample_sink(self, snapshot: Snapshot) -> None:
        self.chips_read = len(snapshot.devices)
        chips = {d.device: d.serial for d in snapshot.devices if d.backend != "cpu"}
        if chips:  # a serial is read now and then (a detail query): one known is kept
            self._chips = {k: v or self._chips.get(k) for k, v in chips.items()}
        if snapshot.devices:
            self.readings_taken += 1
        for outage in self.outages.track(snapshot):
            self._record_outage(outage)
        if self.fault_watch is not None:
            for change in self.fault_watch.track(snapshot):
                self._record_fault(change)
        try:  # written by the main loop (through the spool): a slow store never delays a tick
            self.writer.append(snapshot)
        except StoreError as exc:  # the main loop did not move rows out for minutes
            self.fatal = exc
            self.request_stop("store")

    def _record_fault(self, c: FaultChange) -> None:
        """A change of a chip's own fault report: an event at once (seen on /metrics from
        the next scrape, judged by every later analysis), and a line when it matters."""
        message = c.message()
        self.spool.event("device_fault", ts=c.ts, node=self.membership.node, message=message, detail=c.detail())
        said = (c.device, c.signal, c.code)
        if c.severity != "info" and said not in self._faults_said:  # a count rising again is an event only
            self._faults_said.add(said)
            self.out.write(f"soak: [{c.severity}] {message}\n")
            self.out.flush()

    def _record_outage(self, o: Outage) -> None:
        self.spool.event("outage", ts=o.start, end_ts=o.end, node=self.membership.node, message=o.message,
                         detail=o.detail)

    def _event(self, kind: str, message: str, detail: dict[str, Any], *, workload: str | None = None,
               rank: int | None = None, ts: float | None = None) -> None:
        if kind in ("crash", "hang"):
            kind, message, detail = self.membership.workload_failed(self.started, kind, message, workload, rank, detail)
        self.spool.event(kind, ts=self.started.clock.now() if ts is None else ts,
                         workload=workload, rank=rank, message=message, detail=detail, node=self.membership.node)
        if kind in ("crash", "hang", "restart", "stop"):
            self.out.write(f"soak: {message}\n")
            self.out.flush()

    def _analysis_job(self) -> None:
        found = self.online.step(self.started, self.membership, self.spool, self._median_step_time)
        if found is not None:
            self.found = found
            self.findings = found.findings
            if found.passing is not None:  # None: another node judges the run
                self.passing = found.passing

    def _median_step_time(self) -> float | None:
        agg = getattr(self, "agg", None)  # None until the workloads are started
        times = sorted(s.step_time_s for s in (agg.ranks.values() if agg else ()) if s.step_time_s)
        return times[len(times) // 2] if times else None

    def _out_of_space(self) -> bool:
        """Whether the run failed for want of disk space (the store or a checkpoint could not
        be written): then it is stopped like the disk watch stops it, not left failed."""
        if self.stop_reason == "disk":
            return False
        if self.disk.out_of_space(self.fatal):
            self.stop_reason, self.fatal = "disk", None
            return True
        return False

    # ------------------------------------------------------------------ status
    def _status(self) -> RunStatus:
        now = self.started.clock.now()
        ranks = tuple(
            RankStatus(s.workload, s.rank, s.step, s.step_time_s, s.tokens_per_s,
                       None if s.last_hb_ts is None else self.started.clock.to_scaled(s.last_hb_ts), s.compute_s)
            for _, s in sorted(self.agg.ranks.items())
        )
        counts: dict[tuple[str, str], int] = {}
        for f in self.findings:
            key = (str(f["kind"]), str(f.get("severity")))
            counts[key] = counts.get(key, 0) + 1
        verdict = "running" if self.passing is None or self.stop_reason is None else ("pass" if self.passing else "fail")
        return RunStatus(
            run_id=self.started.run_id, workload=self._workload_label(), verdict=verdict,
            elapsed_s=max(0.0, now - self.started.started_ts), remaining_s=max(0.0, self.started.planned_end_ts - now),
            restarts=self._restarts(),
            ranks=ranks, findings=counts, passing=self.passing, clock_offset_s=self.membership.clock_offset_s,
            open_findings=self._open_findings(), numeric=self._numeric_counts(),
            **({} if self.found is None else dict(
                criteria=self.found.criteria, link_test=self.found.link_test,
                nodes_by_status=self.found.nodes_by_status, reliability=self.found.reliability)),
        )

    def _open_findings(self) -> tuple[OpenFinding, ...]:
        """The latest analysis' open findings, and the chips' own faults seen since it (the
        fault watch answers within a detail interval; the analysis comes when it comes)."""
        judged = self.found.open if self.found is not None else ()
        have = {(f.kind, f.node, f.device, f.metric) for f in judged}
        node = self.membership.node
        seen = tuple(OpenFinding("device_fault", sev, node, device, kind, f"device_fault.{kind}")
                     for (device, kind), sev in sorted((self.fault_watch.open() if self.fault_watch else {}).items())
                     if ("device_fault", node, device, kind) not in have)
        # the workloads' wrong results, opened as their events were stored
        have |= {(f.kind, f.node, f.device, f.metric) for f in seen}
        numeric = tuple(OpenFinding(kind, sev, n, device, metric, numerics.CODES[kind])
                        for (kind, n, device, metric), sev in sorted(self.numerics.open.items(), key=str)
                        if (kind, n, device, metric) not in have)
        return tuple(judged) + seen + numeric

    # ------------------------------------------------------------------ the run
    def run(self) -> int:
        if not self.resume_id and self.plan is not None and self.plan.exporter.listen:
            # A taken port is found before a run folder or a store row exists: a mistake in
            # the flags must not leave a failed run behind.
            _check_listen(self.plan.exporter.listen)
        try:
            run_id, run_dir, store = self._open()
            self.started = self._begin(run_id, run_dir, store)
        except BaseException as exc:
            self._log_start_failure(exc)
            self._close()
            raise
        try:
            return self._run_started()
        finally:
            self._close()

    def _log_start_failure(self, exc: BaseException) -> None:
        """Why the run did not start, in ``daemon.log`` as well as on stderr: an empty log must
        never hide it. Only once this daemon holds the run folder's lock (its log is set up):
        before that the folder is not there yet, or belongs to another daemon."""
        if self.log_handler is None:
            return
        if isinstance(exc, UserError):
            log.error("daemon not started: %s", redact(str(exc)))
        elif isinstance(exc, Exception):
            log.exception("daemon not started")
        else:  # interrupted while starting
            log.error("daemon not started: %s", type(exc).__name__)

    def _close(self) -> None:
        if self._store is not None:
            self._store.close()
        if self.log_handler is not None:
            runfolder.teardown_logging(self.log_handler)
        if self.lock is not None:
            self.lock.release()

    def _run_started(self) -> int:
        from soak.daemon import telemetry

        plan = self.plan
        self.backend = telemetry.make_backend(plan, self.started.run_dir, self.started.clock,
                                              pid_provider=lambda: [s.pid for s in self.supervisors if s.pid])
        self.npu_smi = plan.devices.npu_smi
        if hasattr(self.backend, "sim_dir"):
            self.npu_smi = str(Path(self.backend.sim_dir) / "npu-smi")
        manifest, preflight = None, None
        if not self.resume_id:
            manifest = record_manifest(self.started, npu_smi=self.npu_smi, node=self.membership.node,
                                       on_run_row=self.membership.owns_run_row)
            if plan.run.preflight:
                preflight = run_preflight(self.started, npu_smi=self.npu_smi, node=self.membership.node, out=self.out)
                # the soak's duration counts from the workloads' start, not the self-check's
                self.started = replace(self.started, planned_end_ts=self.started.clock.now() + plan.run.duration_s)
                self.membership.planned_end_moved(self.started)
        self.agg = StepAggregator(sampling.step_window_s(self.step_window_s, plan.run.time_scale, plan.sampling.interval_s),
                                  to_ts=self.started.clock.to_scaled,
                                  attempt=lambda w: self._sup(w).attempt if self._sup(w) else 1,
                                  place=self._rank_chip)
        self.follower = HeartbeatFollower(self.started.run_dir / layout.HEARTBEATS)
        if self.resume_id:
            # the steps of the last open window were never stored (and an orphan, where no
            # parent-death signal tied it to the dead daemon, went on stepping): read on
            # from what the store holds, not from the end of the files
            self.follower.resume_after(
                self.started.store.heartbeat_marks(self.started.run_id, set(EVENT_KINDS.values()),
                                                   self.membership.node),
                self.started.clock.to_scaled)
        self.disk = DiskWatch(self.started.run_dir, self.started.run_id, plan.jobs.min_free_bytes, self.request_stop)
        self.disk.hold_reserve()
        self.writer = self.started.store.writer(self.started.run_id, max_rows=4096, max_delay_s=plan.sampling.flush_every_s,
                                                node=self.membership.node)
        policy = RestartPolicy(plan.restart.max_restarts, plan.restart.backoff_initial_s,
                               plan.restart.backoff_max_s, plan.restart.hang_timeout_s, plan.restart.stop_grace_s)
        argv_factory = self.argv_factory or default_argv(plan, self.membership.rendezvous(plan.workloads))
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        env.update(self.membership.workload_env())
        per_workload_restart_budget = self.started.restarts0
        for w in plan.workloads:
            def argv_for(attempt: int, w: WorkloadSpec = w) -> list[str]:
                # with the burn-in clock on, an attempt may have to train past the planned end, up to
                # the longest the clock allows (the daemon stops it at the end either way)
                run = self.started
                start = run.planned_end_ts - run.plan.run.duration_s
                end = max(run.planned_end_ts, start + burnin.cap_s(run.profile.evidence, run.plan.run.duration_s))
                # and on a cluster node, past it by as long as the node may wait there for the
                # clock's decision, training on meanwhile
                wall_left = (run.clock.wall_seconds(end - run.clock.now())
                             + burnin.decision_wait_s(run.plan, run.profile.evidence))
                return argv_factory(w, self.started.run_dir, attempt, wall_left)

            self.supervisors.append(Supervisor(
                w.name, argv_for, self.started.run_dir / layout.LOGS, policy, progress=self.agg.min_progress,
                emit=lambda kind, msg, detail, name=w.name: self._event(kind, msg, detail, workload=name),
                env=env, restarts=per_workload_restart_budget,
                # a killed agent leaves no orphan training: on a cluster node it would go on
                # hosting the rendezvous, unsupervised; started from this thread (the loop's
                # tick), which lives as long as the daemon
                die_with_agent=True,
            ))
            per_workload_restart_budget = 0  # restarts so far are counted once, on the first

        pipeline = None
        # the chips' fault reports as the run recorded them so far: a resumed daemon goes on
        # from them instead of reporting every fault again
        self.fault_watch = FaultWatch(load_table(plan.faults.codes_file, key="faults.codes_file"))
        if self.resume_id:
            self.fault_watch.resume(self.started.store.load_events(self.started.run_id, "device_fault"),
                                    node=self.membership.node)
        wd_every = sdnotify.watchdog_interval_s()
        jobs = Jobs(plan, analysis=self._analysis_job, analysis_every_s=analysis_period_s(plan), wal_checkpoint=self.started.store.checkpoint_wal,
                    disk_check=self.disk.check, watchdog=(lambda: sdnotify.notify("WATCHDOG=1")) if wd_every else None,
                    watchdog_every_s=wd_every)
        self._install_signals()
        status = "finished"
        bug: Exception | None = None
        try:
            pipeline = telemetry.start_pipeline(plan, self.backend, [self._sample_sink], self.started.clock,
                                                RunCollector(lambda: self.status),
                                                labels=self.membership.metric_labels(self.started.run_id))
            self.membership.start_training(self.started, resumed=bool(self.resume_id), manifest=manifest,
                                           preflight=preflight, chips=self.chips_read, moved=self._move_planned_end)
            jobs.start()
            self.disk.check()
            for s in self.supervisors:
                s.tick()
            runfolder.write_children(self.started.run_dir, [s.pid for s in self.supervisors if s.pid])
            sdnotify.notify("READY=1", f"STATUS=run {self.started.run_id} started")
            self._say_started()
            self._say_blind()
            status = self._loop()
        except UserError as exc:  # store unwritable, port taken: end the run cleanly, one line
            self.fatal = exc
            status = "failed"
        except Exception as exc:  # a bug: the run still ends (not 'running' for ever), then the traceback
            log.exception("daemon loop")
            bug, status = exc, "failed"
        finally:
            for s in self.supervisors:
                s.stop()
            if pipeline is not None:
                _stop_quietly(pipeline.stop)
                # checked against the store's rows to tell a reading lost from one never taken
                log.info("sampler: %d ticks read chips", self.readings_taken)
            jobs.shutdown()
            _stop_quietly(self.backend.close)
        if status == "failed" and bug is None and self._out_of_space():
            status = "stopped"
        rc = self._finish(status)
        if bug is not None:
            raise bug
        return rc

    def _say_started(self) -> None:
        """Where to look while it runs: the metrics endpoint and the app of this run."""
        plan, run = self.plan, self.started
        listen = plan.exporter.listen
        scheme = "http"
        if plan.exporter.web_config:  # TLS, or only basic auth
            from exporters.webconfig import load_web_config

            scheme = "https" if load_web_config(plan.exporter.web_config, "exporter.web_config").tls else "http"
        metrics = f"{scheme}://{listen}/metrics" if listen else "not served (exporter.listen is empty)"
        data_dir = run.run_dir.parent
        self.out.write(f"soak: run {run.run_id}: {workload_words(plan)} for {duration_words(plan.run.duration_s)}"
                       + (f" (time scale ×{plan.run.time_scale:g})" if plan.run.time_scale != 1 else "") + "\n"
                       f"  metrics:    {metrics}\n"
                       f"  report app: soak report serve --data-dir {data_dir}   then open http://127.0.0.1:8501/\n")
        self.out.flush()

    def _say_blind(self) -> None:
        """A detector that cannot see at this run's sampling (tick x time scale; the step rows'
        window x time scale for those that read them) says so, in one line and a ``note``
        event; its criterion is then not judged (``soak.judge``)."""
        plan, run = self.plan, self.started
        tick, scale = plan.sampling.interval_s, plan.run.time_scale
        steps = sampling.run_step_interval_s(tick, scale, self.step_window_s)
        for b in sampling.blind(sampling.run_interval_s(tick, scale), run.profile, steps):
            msg, detail = sampling.run_note(b, tick, scale)
            self.spool.event("note", ts=run.clock.now(), message=msg, detail=detail, node=self.membership.node)
            self.out.write(f"soak: {msg}\n")
        faults = run.profile.faults
        read_s = fault_read_interval_s(plan, getattr(self.backend, "name", None), scale)
        if read_s is not None and read_s > faults.max_read_interval_s * (1 + 1e-9):
            # the device-faults criterion will not be judged at this cadence (soak.criteria)
            fix_s = faults.max_read_interval_s / float(scale or 1.0)
            msg = (f"device faults cannot be judged at one read of the fault views per {hm(read_s)} of the run: "
                   f"needs one per {hm(faults.max_read_interval_s)} or less; use --detail-interval {fix_s:g}s or less")
            self.spool.event("note", ts=run.clock.now(), message=msg, node=self.membership.node,
                             detail={"kind": "device_fault", "blind": True, "interval_s": read_s,
                                     "max_interval_s": faults.max_read_interval_s, "fix_detail_interval_s": fix_s})
            self.out.write(f"soak: {msg}\n")
        self.out.flush()

    def _burn_in_extends(self) -> bool:
        """At or past the planned end: whether the run goes on, the burn-in clock
        (``soak.daemon.burnin``) having moved its end, or (a node of a cluster run) while this
        agent waits for that decision. The store away: the run ends as planned."""
        run = self.started
        if not burnin.on(run.profile.evidence):
            return False
        if self.spool.down:
            log.error("burn-in clock not read (the store is away): the run ends at its planned end")
            return False
        try:
            goes_on = self.membership.at_planned_end(run, self._burn_in_decision)
        except StoreError as exc:
            log.error("burn-in clock not read (%s): the run ends at its planned end", exc)
            return False
        return goes_on is not False

    def _burn_in_decision(self, run: StartedRun) -> StartedRun | None:
        """The burn-in clock's decision at the planned end, from the run's events in the store
        (a cluster run's: every node's): the run moved to its later end, recorded in the run
        row, the log and a ``note`` event; None when it ends now."""
        plan = run.plan
        start = run.planned_end_ts - plan.run.duration_s
        now = run.clock.now()
        ext = burnin.extension(run.store.load_events(run.run_id), [w.name for w in plan.workloads],
                               planned_start=start, now=now, duration_s=plan.run.duration_s,
                               evidence=run.profile.evidence, time_scale=plan.run.time_scale)
        if ext is None:
            log.info("burn-in clock: %g h without an unexpected failure reached; the run ends at its planned end",
                     run.profile.evidence.min_uninterrupted_h)
            return None
        moved = burnin.moved(run, ext.planned_end)
        run.store.update_run(run.run_id, planned_end_ts=ext.planned_end, plan=recorded_plan(moved.plan))
        self._move_planned_end(moved)
        msg, detail = burnin.note(ext, run.profile.evidence, planned_start=start)
        self.spool.event("note", ts=now, message=msg, detail=detail, node=self.membership.node)
        self.out.write(f"soak: {msg}\n")
        self.out.flush()
        return moved

    def _move_planned_end(self, run: StartedRun) -> None:
        """The run's planned end moved: a cluster run's duration counts from its barrier, and
        the burn-in clock moves the end later (the plan's duration with it)."""
        self.started = run
        self.plan = run.plan

    def _restarts(self) -> int:
        # the first supervisor carries the restarts of earlier daemons of this run
        return sum(s.restarts for s in self.supervisors)

    def _rank_chip(self, workload: str, rank: int, device: str | None) -> tuple[str | None, str | None]:
        """The chip (and its serial) rank ``rank`` of ``workload`` runs on, from the latest
        reading's chips (``soak.analysis.numerics.chip_of_rank``, as the judge places them)."""
        chips = dict(self._chips)
        spec = next((w for w in (self.plan.workloads if self.plan is not None else ()) if w.name == workload), None)
        chip = numerics.chip_of_rank(rank, device, numerics.chip_order(chips), spec.nproc if spec else 1)
        return chip, chips.get(chip) if chip else None

    def _numeric_counts(self) -> numerics.NumericCounts:
        """Checks run per chip (the ranks' cumulative counts, placed on their chips) and the
        wrong results counted so far, for /metrics."""
        checks: dict[tuple[str | None, str], int] = {}
        node = self.membership.node
        agg = getattr(self, "agg", None)  # None until the workloads are started
        for (workload, rank), st in sorted(agg.ranks.items() if agg else ()):
            if st.numeric_checks is None:
                continue
            chip = self._rank_chip(workload, rank, st.device)[0]
            key = (node, chip or rank_device(workload, rank))
            checks[key] = checks.get(key, 0) + st.numeric_checks
        return self.numerics.counts(checks)

    def _sup(self, name: str) -> Supervisor | None:
        for s in self.supervisors:
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
                runfolder.write_children(self.started.run_dir, [s.pid for s in self.supervisors if s.pid])
                self.spool.update_run(restarts=self._restarts())
            self.status = self._status()
            now_mono = time.monotonic()
            if now_mono - last_progress >= self.progress_every_s:
                last_progress = now_mono
                line = progress_line(self.status)
                self.out.status(line)
                sdnotify.notify(f"STATUS={line}")
            if self.fatal is not None:
                return "failed"
            if self.stop_reason is not None:
                return "stopped"
            if any(st == GAVE_UP for st in states):
                return "failed"
            if all(st == DONE for st in states):
                return "finished"
            if self.started.clock.now() >= self.started.planned_end_ts and not self._burn_in_extends():
                return "finished"
            self._store_tick()
            if not self.spool.down:
                try:
                    stop = self.membership.tick(self.started, self.supervisors, restarts=self._restarts(),
                                                chips=self.chips_read, store_back_at=self.spool.back_at)
                except StoreError as exc:  # a read of the cluster's state: tried again once it is back
                    self.spool.lost(exc)
                else:
                    if stop is not None:
                        self.request_stop(stop)
            self._stop_event.wait(self.loop_interval_s)

    def _store_tick(self) -> None:
        """Samples to the store once due (or to the spool while it is away), the store tried
        again during an outage, and the outage's bound kept."""
        try:
            self.spool.samples(self.writer)
        except StoreError as exc:  # a store the spool does not stand in for (SQLite): the run stops
            self.fatal = exc
            return
        if self.spool.down and not self.spool.poll():
            overdue = self.spool.overdue()
            if overdue is not None:
                log.error("%s: stopping this node, its spool kept", overdue)
                self.request_stop("store")

    def _drain_heartbeats(self, now_wall: float | None) -> None:
        records = self.follower.poll()
        rows, events = self.agg.feed(records)
        rows += self.agg.flush(now_wall)
        if rows:
            self.spool.steps(rows, node=self.membership.node)
        for e in events:
            self.spool.event(e["kind"], ts=e["ts"], workload=e["workload"], rank=e["rank"],
                             message=e["message"], detail=e["detail"], node=self.membership.node)
            if self.numerics.add(e["kind"], self.membership.node, e["workload"], e["detail"]):
                d = e["detail"]
                where = d.get("chip") or (f"{e['workload']} rank {d['suspect_rank']}"
                                          if isinstance(d.get("suspect_rank"), int) else f"{e['workload']} (no chip named)")
                self.out.write(f"soak: finding [{d.get('severity')}] {e['kind']} on {where} at step "
                               f"{d.get('step')}: {e['message']}\n")
                self.out.flush()

    def _store_back(self) -> bool:
        """At the end of a run during a store outage, whether the store came back (its spool
        written) within what is left of ``cluster.store_outage_max``; a stop asked by a
        signal, or by the bound itself, waits no longer than one more try."""
        spool = self.spool
        if spool.poll(force=True):
            return True
        if self.stop_reason is not None:
            return False
        while spool.overdue() is None:  # bounded: overdue once the outage passes its bound
            if spool.poll():
                return True
            time.sleep(0.5)
        return False

    def _finish(self, status: str) -> int:
        run = self.started
        end = run.clock.now()
        fatal = self.fatal
        verdict: str | None = None
        withdrawn: list[str] = []  # the online findings the final analysis did not keep
        # the workloads are stopped: what they left half-written goes, and on a full disk
        # the space held back for these last records is given to the store
        removed = layout.remove_temp_files(run.run_dir)
        self.disk.release_reserve()
        try:
            spool = self.spool
            if self.stop_reason == "disk":
                spool.event("disk", ts=end, message=self.disk.message, node=self.membership.node,
                            detail={**self.disk.detail, "temp_files_removed": [p.name for p in removed]})
            try:
                spool.samples(self.writer, force=True)
            except StoreError as exc:  # (SQLite) the last batch is lost, the records below must not be
                log.error("samples of the last %.0f s not stored: %s", self.plan.sampling.flush_every_s, exc)
                if self.stop_reason != "disk":
                    fatal = fatal or exc
            self._drain_heartbeats(None)
            for outage in self.outages.close_all(end):
                self._record_outage(outage)
            if not self._store_back():
                # no 'stop' event: the run stays 'running' in the store, and --resume writes the
                # spool and goes on (the time this node was down is its 'gap')
                fatal = StoreError(spool.kept_line(run.run_id))
                raise fatal
            if status == "stopped":
                spool.event("stop", ts=end, message=f"stopped ({self.stop_reason})",
                            detail={"reason": self.stop_reason}, node=self.membership.node)
            judged = None
            if not self.membership.ended(run, status=status, ended_ts=end, restarts=self._restarts(), fatal=fatal):
                return 1 if status == "failed" else 0  # another node judges the run
            final = judge_final(run, self.membership, status=status,
                                why=str(self.fatal) if self.fatal else self.stop_reason, ended_ts=end)
            if not final.recorded:  # the lease was taken from this agent while it judged
                self.out.write(f"soak: run {run.run_id} {status}; this agent's verdict not recorded: another "
                               f"holds the run's judging lease (soak cluster status {run.run_id} --db URL)\n")
                self.out.flush()
                return 1 if status == "failed" else 0
            judged, verdict = final.judged, final.verdict
            if final.findings is not None:
                self.findings = final.findings
                withdrawn = [e.message or str(e.detail.get("kind")) for e in
                             withdrawn_findings(run.store.load_events(run.run_id, kind="finding"), final.findings)]
        except StoreError as exc:
            fatal = fatal or exc
        sdnotify.notify("STOPPING=1", f"STATUS=run {run.run_id} {status}")
        if fatal is not None:
            log.error("%s", fatal)
            raise StoreError(str(fatal)) from None
        for line in ended_lines(run.run_id, status, verdict, len(self.findings), withdrawn):
            self.out.write(line + "\n")
        if judged is not None and verdict == "fail":
            for reason in judged.reasons[:5]:
                self.out.write(f"  {reason}\n")
            if len(judged.reasons) > 5:  # the rest is in the report, never dropped unsaid
                self.out.write(f"  ... {len(judged.reasons) - 5} more: soak runs show {run.run_id}\n")
        elif judged is not None and verdict is None:  # what kept it from a pass, where a blind detector did
            for reason in judged.reasons:
                if getattr(reason, "code", "") == "reason.blind":
                    self.out.write(f"  {reason}\n")
        self.out.flush()
        if self.stop_reason == "disk":
            raise StoreError(self.disk.message)
        return 1 if (status == "failed" or verdict == "fail") else 0


def _stop_quietly(fn: Callable[[], Any] | None) -> None:
    if fn is None:
        return
    try:
        fn()
    except Exception:
        log.exception("stopping")


def _check_listen(listen: str) -> None:
    """Raise the exporter's one-line InputError if ``listen`` cannot be bound right now."""
    from exporters.server import check_listen

    check_listen(listen)
