"""Plumbing every workload shares: arguments, heartbeats, checkpoints, the collective
watchdog, and the training driver that ties them to fault injection.

A workload is an object with ``state_dict()``, ``load_state_dict(state)`` and
``step(step) -> dict`` (extra heartbeat fields). ``main(name, factory)`` does the rest:
device and process group, resume from the last checkpoint, the step loop, heartbeats
(``heartbeats/<workload>-rank<R>.jsonl``, see docs/architecture.md), checkpoints
(``checkpoints/<workload>/step_<N>.pt``), injection, and exit codes.

Exit codes: 0 finished, 1 crashed (or injected crash), 2 bad arguments, 3 a collective
timed out (the supervisor restarts the ranks, which resume from the last checkpoint).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.device import Device, host_rss_bytes
from soak.device_names import rank_device
from soak.errors import CheckpointError, UserError
from soak.runfolder import CHECKPOINT_TMP_GLOB, CHECKPOINTS, HEARTBEATS
from soak.workloads.capture import Capturer
from soak.workloads.inject import Injector, InjectSpec, parse_all
from soak.workloads.linktest import DEFAULT_BYTES as DEFAULT_LINK_BYTES
from soak.workloads.linktest import NODE_RANK_ENV, LinkTester

SIZES = ("tiny", "small", "medium", "large")
EXIT_CRASH, EXIT_USAGE, EXIT_TIMEOUT = 1, 2, 3
HEARTBEAT_KEYS = (
    "ts", "workload", "rank", "world_size", "device", "event", "step", "step_time_s", "compute_s", "loss",
    "tokens_per_s", "tflops", "mem_allocated_bytes", "mem_reserved_bytes", "mem_peak_bytes",
    "host_rss_bytes", "phase", "comm_timeouts", "collective", "sdc_mismatches", "message", "capture", "link_test",
    "seconds", "injected", "inject", "numeric_checks",
    # numerical checks: lm's step lines, then the fields of sdc_mismatch, nonfinite, loss_spike, alignment
    "grad_norm", "check", "error", "tolerance", "suspect_rank", "classification", "what",
    "value", "median", "multiple", "steps", "max_rel_diff", "device_losses", "reference_losses",
)  # fmt: skip


# Rates a workload measures around its own compute (a slowed rank must report them slowed).
RATE_FIELDS = ("tokens_per_s", "tflops")


def slowed_rates(fields: dict[str, Any], slowdown: float) -> dict[str, Any]:
    """A step's fields with its rates divided by an injected ``slowdown``: the injection
    stretches the rank's compute after the workload timed it, and a rank slowed ``slowdown``
    times does that much less work per second (it must not look faster than its peers)."""
    if slowdown == 1.0:
        return fields
    return {k: (v / slowdown if k in RATE_FIELDS and v is not None else v) for k, v in fields.items()}


def build_parser(workload: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m soak.workloads.{workload}", description=description)
    p.add_argument("--run-dir", required=True, type=Path, help="the run folder")
    p.add_argument("--size", choices=SIZES, default="tiny", help="preset (default: tiny)")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--steps", type=int, help="stop at this global step (counts across restarts)")
    stop.add_argument("--duration-s", type=float, help="stop after this many seconds (this attempt)")
    p.add_argument("--ckpt-every", type=int, default=None,
                   help="checkpoint every N steps (default: per preset; 0 = never)")
    p.add_argument("--keep", type=int, default=3, help="checkpoints kept (default: 3)")
    p.add_argument("--inject", action="append", default=[], metavar="SPEC",
                   help="fault to inject, e.g. leak:50MB/min (repeatable; docs/workloads.md)")
    p.add_argument("--device-backend", choices=("auto", "npu", "cuda", "cpu"), default="auto")
    p.add_argument("--comm-timeout-s", type=float, default=600.0,
                   help="collective timeout for init_process_group and the watchdog (default: 600)")
    p.add_argument("--heartbeat-interval-s", type=float, default=1.0,
                   help="at most one step line per this many seconds (default: 1)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads per rank (default: 1)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--profile-steps", type=int, default=10,
                   help="steps per profiler capture; 0 = no captures (default: 10)")
    p.add_argument("--profile-warmup", type=int, default=20,
                   help="steps before the baseline capture (default: 20)")
    p.add_argument("--profile-every-s", type=float, default=0.0,
                   help="a capture every this many seconds; 0 = only baseline and requests (default: 0)")
    p.add_argument("--profile-max-mb", type=float, default=50.0,
                   help="largest trace kept on disk, MB; a larger one keeps only its summary (default: 50)")
    p.add_argument("--link-test-every-s", type=float, default=None,
                   help="pairwise link test between nodes before the first step and then this often "
                        "(wall); 0 = at the start only; absent = none (docs/cluster.md)")
    p.add_argument("--link-test-bytes", type=int, default=0,
                   help="all-reduce size of the link test, bytes (default: per preset, 1 MiB for tiny)")
    p.add_argument("--no-heartbeat", action="store_true", help=argparse.SUPPRESS)  # benchmarks
    return p


def positive(args: argparse.Namespace) -> None:
    for name in ("steps", "duration_s", "keep", "heartbeat_interval_s", "comm_timeout_s"):
        value = getattr(args, name)
        if value is not None and value <= 0 and name != "heartbeat_interval_s":
            raise UserError(f"--{name.replace('_', '-')} must be positive, got {value}")
    if args.link_test_every_s is not None and args.link_test_every_s < 0:
        raise UserError(f"--link-test-every-s must be >= 0, got {args.link_test_every_s}")
    if getattr(args, "spike_multiple", 2.0) <= 1.0:
        raise UserError(f"--spike-multiple must be > 1, got {args.spike_multiple}")
    if args.ckpt_every is not None and args.ckpt_every < 0:
        raise UserError(f"--ckpt-every must be >= 0, got {args.ckpt_every}")
    for name in ("profile_steps", "profile_warmup", "profile_every_s", "profile_max_mb", "link_test_bytes",
                 "check_every", "align_steps"):  # the last two: lm's numerical checks
        if (getattr(args, name, None) or 0) < 0:
            raise UserError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")


class Heartbeat:
    """Appends heartbeat lines for one rank; every line flushed so the daemon can follow."""

    def __init__(self, run_dir: Path, workload: str, rank: int, world_size: int,
                 device: Device, interval_s: float = 1.0, enabled: bool = True) -> None:
        self.path = run_dir / HEARTBEATS / f"{rank_device(workload, rank)}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.enabled = enabled
        self._f = open(self.path, "a", buffering=1, encoding="utf-8") if enabled else None
        self.base = {"workload": workload, "rank": rank, "world_size": world_size,
                     "device": device.name}
        self.device = device
        self.interval_s = interval_s
        self.comm_timeouts = 0
        self.sdc_mismatches = 0
        # numerical checks run so far (soak.analysis.numerics: the evidence of the criterion);
        # None for a workload that checks nothing, which then claims nothing
        self.numeric_checks: int | None = None
        self._last = 0.0
        self._lock = threading.RLock()  # the watchdog thread and the SIGTERM handler write too
        self.last_step = 0

    def _write(self, event: str, step: int, fields: dict[str, Any]) -> None:
        if self._f is None:
            return
        mem = self.device.memory()
        rec = dict.fromkeys(HEARTBEAT_KEYS)
        rec.update(self.base)
        rec.update(
            ts=time.time(), event=event, step=step, comm_timeouts=self.comm_timeouts,
            sdc_mismatches=self.sdc_mismatches, numeric_checks=self.numeric_checks, mem_allocated_bytes=mem.allocated_bytes,
            mem_reserved_bytes=mem.reserved_bytes, mem_peak_bytes=mem.peak_bytes,
            host_rss_bytes=host_rss_bytes(),
        )
        rec.update(fields)
        line = json.dumps(rec, separators=(",", ":")) + "\n"
        with self._lock:
            self._f.write(line)

    def step(self, step: int, **fields: Any) -> bool:
        """A step line, at most one per ``interval_s``; True when written."""
        now = time.monotonic()
        if now - self._last < self.interval_s:
            return False
        self._last = now
        self._write("step", step, fields)
        return True

    def event(self, event: str, step: int, message: str | None = None, **fields: Any) -> None:
        self._write(event, step, {"message": message, **fields})

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


_CKPT = re.compile(r"^step_(\d+)\.pt$")


class Checkpointer:
    """``checkpoints/<workload>/step_<N>.pt``: temp file + fsync + ``os.replace``, keep last k."""

    def __init__(self, run_dir: Path, workload: str, keep: int = 3) -> None:
        self.dir = run_dir / CHECKPOINTS / workload
        self.keep = max(1, keep)

    def clean_temps(self) -> None:
        """Remove temp files a killed writer left behind."""
        if self.dir.is_dir():
            for p in self.dir.glob(CHECKPOINT_TMP_GLOB.split("/", 1)[1]):
                p.unlink(missing_ok=True)

    def steps(self) -> list[int]:
        if not self.dir.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.dir.iterdir() if (m := _CKPT.match(p.name)))

    def path(self, step: int) -> Path:
        return self.dir / f"step_{step}.pt"

    def save(self, step: int, state: dict[str, Any]) -> Path:
        import torch

        self.dir.mkdir(parents=True, exist_ok=True)
        final = self.path(step)
        tmp = self.dir / f".{final.name}.tmp-{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, final)  # readers see the old file or the whole new one, never half
        except BaseException:
            tmp.unlink(missing_ok=True)  # a full disk: the half file would only fill it further
            raise
        try:
            fd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(fd)  # make the rename itself durable
            finally:
                os.close(fd)
        except OSError:
            pass
        for old in self.steps()[: -self.keep]:
            self.path(old).unlink(missing_ok=True)
        return final

    def load(self, step: int) -> dict[str, Any]:
        """The checkpoint of ``step``, unpickled with ``weights_only``: a checkpoint is a
        pickle, and anyone who can write the run folder could leave one that runs code on
        resume. What soak saves (tensors, an optimizer's state, Python's RNG state, the
        options) is all ``weights_only`` allows; anything else raises ``CheckpointError``."""
        import pickle

        import torch

        path = self.path(step)
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            why = next((line.strip() for line in str(exc).splitlines() if "unsupported" in line.lower()), "")
            raise CheckpointError(f"{path}: not a checkpoint soak wrote, not loaded ({why or 'weights_only'}); "
                                  "remove it to resume from the one before") from exc


class Watchdog:
    """Ends the process when one guarded collective outlives its deadline.

    The process-group timeout normally fires first (and is caught in the driver); this is the
    backstop for a collective stuck in a place the framework does not time out.
    """

    def __init__(self, hb: Heartbeat, timeout_s: float) -> None:
        self.hb = hb
        # later than the process group's own timeout, so that one reports first when it works
        self.timeout_s = timeout_s * 1.25 + 5.0
        self._deadline: float | None = None
        self._what = ""
        self.last = ""  # the collective most recently entered, named in timeout messages
        self._cv = threading.Condition()
        threading.Thread(target=self._run, name="soak-watchdog", daemon=True).start()

    @contextmanager
    def guard(self, op: str, step: int) -> Iterator[None]:
        with self._cv:
            self._deadline = time.monotonic() + self.timeout_s
            self._what = self.last = f"{op} at step {step}"
            self._step = step
            self._cv.notify()
        try:
            yield
        finally:
            with self._cv:
                self._deadline = None

    def _run(self) -> None:
        with self._cv:
            while True:
                if self._deadline is None:
                    self._cv.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cv.wait(left)
                    continue
                self.hb.comm_timeouts += 1
                msg = f"watchdog: {self._what} exceeded {self.timeout_s:g} s"
                self.hb.event("timeout", self._step, msg)
                self.hb.event("exit", self._step, f"exit {EXIT_TIMEOUT}: {msg}")
                os._exit(EXIT_TIMEOUT)


@dataclass
class Context:
    """What a workload needs from the driver."""

    args: argparse.Namespace
    workload: str
    device: Device
    rank: int
    world_size: int
    local_rank: int
    hb: Heartbeat
    injector: Injector
    watchdog: Watchdog
    specs: tuple[InjectSpec, ...] = ()
    distributed: bool = False
    capturer: Capturer | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # seconds spent inside ``collective()`` so far: in synchronous data parallelism every
    # rank's step takes as long as the slowest one's (the others wait in the all-reduce),
    # so only the time outside the collectives tells a straggler from the ranks it holds up
    collective_s: float = 0.0

    def phase(self, name: str) -> Any:
        """Label a part of a step (data, forward, backward, optimizer, comm) for the profiler;
        free outside a capture."""
        return self.capturer.phase(name) if self.capturer is not None else contextlib.nullcontext()

    @contextmanager
    def data(self, step: int) -> Iterator[None]:
        """The data phase of a step: where a slow loader (``--inject slow-data``) waits. A wait
        of ``DATA_STALL_MIN_S`` or more is a ``data_stall`` event: time the job did not train,
        which the reliability figures count apart."""
        t0 = time.perf_counter()
        with self.phase("data"):
            self.injector.load_data(step)
            yield
        waited = time.perf_counter() - t0
        if waited >= DATA_STALL_MIN_S:
            self.hb.event("data_stall", step, f"waited {waited:.3f} s for the data of step {step}", seconds=waited,
                          injected=bool(self.injector.of("slow-data")))

    @contextmanager
    def collective(self, op: str, step: int) -> Iterator[None]:
        """Wrap every collective: injected delay, then the watchdog's deadline."""
        t0 = time.perf_counter()
        try:
            self.injector.before_collective()
            with self.watchdog.guard(op, step):
                yield
        finally:
            self.collective_s += time.perf_counter() - t0


DATA_STALL_MIN_S = 1.0
"""A wait for one step's data this long is a stall: far above a loader that keeps up, short
enough that a real stall on any accelerator is seen."""


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this rank when its launcher dies.

    torchrun starts each rank in its own session, so killing torchrun's process group (or
    SIGKILL of torchrun by a supervisor) would otherwise leave ranks running as orphans that
    keep writing heartbeats and checkpoints next to the restarted ones.
    """
    if not sys.platform.startswith("linux") or "LOCAL_RANK" not in os.environ:
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the launcher died before prctl took effect
        os._exit(EXIT_CRASH)


def _init_dist(device: Device, timeout_s: float) -> tuple[int, int, int, bool]:
    import datetime

    import torch.distributed as dist

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if world <= 1 and "MASTER_ADDR" not in os.environ:
        return 0, 1, 0, False  # plain `python -m ...`: one process, no process group
    dist.init_process_group(device.dist_backend, timeout=datetime.timedelta(seconds=timeout_s))
    return rank, world, local, True


def is_timeout(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return "timeout" in text or "timed out" in text


def _rng_state(device: Device) -> dict[str, Any]:
    import torch

    return {"python": random.getstate(), "torch": torch.get_rng_state(),
            "device": device.rng_state()}


def _set_rng_state(device: Device, state: dict[str, Any]) -> None:
    import torch

    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    device.set_rng_state(state.get("device"))


def main(workload: str, description: str, factory: Callable[[Context], Any],
         default_ckpt_every: dict[str, int], argv: list[str] | None = None,
         add_args: Callable[[argparse.ArgumentParser], None] | None = None) -> int:
    """Parse arguments, run the workload loop, return the process exit status."""
    die_with_parent()
    parser = build_parser(workload, description)
    if add_args is not None:
        add_args(parser)
    args = parser.parse_args(argv)
    try:
        positive(args)
        specs = parse_all(args.inject, workload)
        device_backend = Device.create(args.device_backend, int(os.environ.get("LOCAL_RANK", "0")))
    except UserError as exc:
        print(f"soak workload {workload}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    import torch

    if device_backend.backend == "cpu":
        torch.set_num_threads(max(1, args.threads))  # ranks share the host's cores
    device_backend.set_current()
    run_dir: Path = args.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    rank, world, local, distributed = _init_dist(device_backend, args.comm_timeout_s)
    hb = Heartbeat(run_dir, workload, rank, world, device_backend,
                   args.heartbeat_interval_s, enabled=not args.no_heartbeat)
    signal.signal(signal.SIGTERM, lambda *_: (hb.event("exit", hb.last_step, "SIGTERM"), os._exit(143)))

    def allocate(nbytes: int) -> Any:
        # filled, not empty: untouched pages would not count as used memory
        return torch.ones(nbytes, dtype=torch.uint8, device=device_backend.name)

    node_rank = os.environ.get(NODE_RANK_ENV, "")
    ctx = Context(args, workload, device_backend, rank, world, local, hb,
                  Injector(specs, rank=rank, run_dir=run_dir, workload=workload,
                           emit=hb.event, allocate=allocate,
                           node_rank=int(node_rank) if node_rank.isdigit() else None),
                  Watchdog(hb, args.comm_timeout_s), specs, distributed)
    ctx.capturer = Capturer(
        run_dir, workload, rank, device_backend.backend, steps=args.profile_steps, warmup=args.profile_warmup,
        every_s=args.profile_every_s, max_bytes=int(args.profile_max_mb * 1e6),
        emit=lambda st, msg, summary: hb.event("capture", st, msg, capture=summary))
    ctx.capturer.enabled = args.profile_steps > 0 and not args.no_heartbeat
    ctx.capturer.warm_up()
    ckpt_every = default_ckpt_every[args.size] if args.ckpt_every is None else args.ckpt_every
    ckpt = Checkpointer(run_dir, workload, args.keep)
    if rank == 0:
        ckpt.clean_temps()
    step = 0
    try:
        random.seed(args.seed + rank)
        torch.manual_seed(args.seed)
        wl = factory(ctx)
        latest, holders = _resume_step(ctx, ckpt)
        if latest > 0:
            state = _resume_state(ctx, ckpt, latest, holders)
            wl.load_state_dict(state["workload"])
            _set_rng_state(device_backend, state["rng"])
            step = hb.last_step = int(state["step"])
            hb.event("resume", step, f"resumed from {ckpt.path(step).name}")
        hb.event("start", step, json.dumps({"size": args.size, "world_size": world,
                                            "inject": list(args.inject)}))
        ctx.injector.announce(step)
        links = _link_tester(ctx, step)
        deadline = None if args.duration_s is None else time.monotonic() + args.duration_s
        last_saved = step
        while args.steps is None or step < args.steps:
            stop, link_due = _agree(ctx, deadline, links, step)
            if stop:
                break
            if link_due and links is not None:
                links.run(step, "interval")
            t_iter, in_collectives = time.perf_counter(), ctx.collective_s
            ctx.capturer.before_step(step + 1)
            ctx.injector.before_step(step + 1)
            t0 = time.perf_counter()
            fields = wl.step(step + 1)
            ctx.injector.after_step(step + 1, time.perf_counter() - t0)
            fields = slowed_rates(fields, ctx.injector.slowdown(step + 1))
            step += 1
            hb.last_step = step
            step_time_s = time.perf_counter() - t_iter
            hb.step(step, step_time_s=step_time_s,
                    compute_s=step_time_s - (ctx.collective_s - in_collectives), **fields)
            ctx.capturer.after_step(step)  # stopping a capture is not part of the step's time
            if ckpt_every and step % ckpt_every == 0:
                _checkpoint(ctx, ckpt, wl, step)
                last_saved = step
        if ckpt_every and step != last_saved:
            _checkpoint(ctx, ckpt, wl, step)
        ctx.capturer.close()
        hb.event("exit", step, "finished")
        if distributed:
            import torch.distributed as dist

            dist.destroy_process_group()
        return 0
    except Exception as exc:
        if is_timeout(exc):
            hb.comm_timeouts += 1
            first = str(exc).splitlines()[0][:300] if str(exc) else ""
            hb.event("timeout", step, f"{ctx.watchdog.last}: {type(exc).__name__}: {first}")
            hb.event("exit", step, f"exit {EXIT_TIMEOUT}: collective timeout")
            hb.close()
            os._exit(EXIT_TIMEOUT)  # skip destroy_process_group: it can block on a dead peer
        hb.event("exit", step, f"exit {EXIT_CRASH}: {type(exc).__name__}: {exc}"[:500])
        hb.close()
        raise


STOP_VOTE_EVERY = 10  # steps between stop votes of a --duration-s run


def _agree(ctx: Context, deadline: float | None, links: LinkTester | None, step: int) -> tuple[bool, bool]:
    """(stop for --duration-s, a link test is due). Ranks must agree, or one would wait
    forever in a collective the others never join: every STOP_VOTE_EVERY steps they
    all-reduce (max) their own verdicts, so all act at the same step, at most that many
    steps late."""
    now = time.monotonic()
    stop = deadline is not None and now >= deadline
    due = links is not None and links.due(now)
    if not ctx.distributed:
        return stop, False
    if step % STOP_VOTE_EVERY or (deadline is None and links is None):
        return False, False
    import torch
    import torch.distributed as dist

    flags = torch.tensor([1.0 if stop else 0.0, 1.0 if due else 0.0], device=ctx.device.name)
    with ctx.watchdog.guard("stop_vote", step):
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    return bool(flags[0].item() > 0), bool(flags[1].item() > 0)


def _link_tester(ctx: Context, step: int) -> LinkTester | None:
    """The cluster's link test, run once now (before the first step of this job); None when
    not asked for or the job has one node."""
    every = ctx.args.link_test_every_s
    if every is None or not ctx.distributed:
        return None
    size = ctx.args.link_test_bytes or DEFAULT_LINK_BYTES[ctx.args.size]
    tester = LinkTester(ctx, size, every_s=every, delay=ctx.injector.link_delay if ctx.injector.of("slow-link") else None)
    if not tester.enabled:
        return None
    tester.run(step, "preflight" if step == 0 else "restart")
    return tester


def _resume_step(ctx: Context, ckpt: Checkpointer) -> tuple[int, list[bool]]:
    """The step every rank resumes from, the latest checkpoint any rank's folder holds, and
    which ranks hold it. Only rank 0 writes checkpoints, into its own run folder, and a job
    formed again across nodes may put rank 0 on a node that never held it: asking rank 0
    alone would start that job from step 0 with the last checkpoint on another node."""
    mine = (ckpt.steps() or [0])[-1]
    if not ctx.distributed:
        return mine, [True]
    import torch.distributed as dist

    latest: list[Any] = [None] * ctx.world_size
    with ctx.watchdog.guard("gather_resume_steps", 0):
        dist.all_gather_object(latest, mine)
    step = max(latest)
    return step, [s == step for s in latest]


def _resume_state(ctx: Context, ckpt: Checkpointer, step: int, holders: list[bool]) -> dict[str, Any]:
    """The checkpoint of ``step``, which every rank resumes from. In a job across nodes (a
    cluster run, each node its own folder) some ranks lack the file: the first rank holding
    it sends them its state."""
    if all(holders):
        return ckpt.load(step)
    import torch.distributed as dist

    src = holders.index(True)
    box = [ckpt.load(step) if ctx.rank == src else None]
    with ctx.watchdog.guard("broadcast_resume_state", step):
        dist.broadcast_object_list(box, src=src)
    return box[0]


def _checkpoint(ctx: Context, ckpt: Checkpointer, wl: Any, step: int) -> None:
    if ctx.rank != 0:
        return  # replicas are identical under DDP; one writer avoids torn shared files
    t0 = time.perf_counter()
    ckpt.save(step, {"step": step, "workload": wl.state_dict(), "rng": _rng_state(ctx.device),
                     "config": {k: (str(v) if isinstance(v, Path) else v)
                                for k, v in vars(ctx.args).items()}})
    took = time.perf_counter() - t0
    # ``seconds``: the time the job did not step, which the reliability figures count apart
    ctx.hb.event("checkpoint", step, f"{ckpt.path(step).name} in {took:.3f} s", phase="checkpoint", seconds=took)


def run_cli(workload: str, description: str, factory: Callable[[Context], Any],
            default_ckpt_every: dict[str, int],
            add_args: Callable[[argparse.ArgumentParser], None] | None = None) -> None:
    code = main(workload, description, factory, default_ckpt_every, None, add_args)
    # A rank that finished leaves without the interpreter's teardown: torch's C++ threads (gloo,
    # the profiler) can abort at static destruction on a loaded host ("terminate called without
    # an active exception", SIGABRT), which would turn a finished run into a crash. Everything
    # the rank keeps is written by now: heartbeat lines are flushed one by one, checkpoints
    # and profiler traces are closed files. An exception still takes the normal way out.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
