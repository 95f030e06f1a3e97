"""Fault injection for workloads: ``--inject KIND:ARGS``.

========================  ==============================================================
spec                      effect
========================  ==============================================================
``leak:RATE[,RANK]``      keep tensors alive at RATE (``50MB/min``, ``1GiB/h``, ``2MB/s``);
                          on the device (host memory on CPU)
``stall:EVERY,FOR[,R]``   data-loader stall: every EVERY seconds sleep FOR seconds before
                          a step (utilization drops to zero; phase stays null). Ranks in
                          lockstep also wait for each other's stalls: give R for one
                          clean stall per period across the job
``hang:AT[,RANK]``        before step AT the rank stops stepping but stays alive
``crash:AT[,RANK]``       before step AT the rank calls ``os._exit(1)``; once per run
                          folder (a marker file), ``crash:AT,always`` on every attempt
``slow-rank:R,FACTOR[,AT]`` rank R takes FACTOR times as long per step (from step AT on,
                          an ``inject`` event marking the moment; from the start without)
``slow-rank:R,FACTOR,``   ... only for FOR seconds of every EVERY (from the start of
``EVERY,FOR``             training): a slowdown that comes and goes
``comm-delay:R,SECONDS``  rank R sleeps SECONDS before each collective
``corrupt:AT[,RANK]``      gemm and lm: from step AT on, the rank's device computes a wrong
                          result (a faulty chip): gemm's check product, lm's output logits
``bitflip:AT[,RANK]``     lm: one bit of one parameter flipped once at step AT (a memory
                          upset: the replicas diverge)
``nan:AT[,RANK]``         lm: the rank's loss is NaN at step AT, once
``slow-data:every=N,``    slow data loader: every N-th step's batch takes S seconds longer
``delay=S[,rank=R]``      to load, inside the step's data phase (``soak.data``), so a
                          profiler capture names data loading as the cause
``slow-link:NODE[,FRAC]`` cluster link test: node rank NODE's pair transfers take longer,
                          so its pairs' busbw is FRAC lower (default 0.3)
========================  ==============================================================

Sizes: ``B``, ``KB``/``MB``/``GB`` (10^3 steps) and ``KiB``/``MiB``/``GiB`` (2^10 steps).
Durations: plain seconds, or ``ms``, ``s``, ``min``/``m``, ``h``. A rank index that is
omitted means every rank.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soak.device_names import rank_device
from soak.errors import InputError

_SIZE = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
_TIME = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
KINDS = ("leak", "stall", "hang", "crash", "slow-rank", "comm-delay", "corrupt", "slow-data", "slow-link",
         "bitflip", "nan")
# the workloads each numerical fault applies to: the ones with a check that can see it
NUMERIC_KINDS = {"corrupt": ("gemm", "lm"), "bitflip": ("lm",), "nan": ("lm",)}


@dataclass(frozen=True)
class InjectSpec:
    kind: str
    raw: str
    at_step: int | None = None
    rank: int | None = None  # None = every rank
    rate_bytes_per_s: float | None = None
    every_s: float | None = None
    for_s: float | None = None
    factor: float | None = None
    delay_s: float | None = None
    always: bool = False
    every_steps: int | None = None
    node_rank: int | None = None  # slow-link: the node (soak's node rank), not a process rank


def _bad(raw: str, why: str) -> InputError:
    return InputError(f"--inject {raw!r}: {why}")


def _duration(raw: str, text: str) -> float:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*", text.lower())
    if not m or (m.group(2) and m.group(2) not in _TIME):
        raise _bad(raw, f"{text!r} is not a duration (e.g. 30, 30s, 500ms, 2min, 1h)")
    return float(m.group(1)) * _TIME.get(m.group(2) or "s", 1.0)


def _int(raw: str, text: str, what: str, minimum: int = 0) -> int:
    if not text.strip().isdigit() or int(text) < minimum:
        raise _bad(raw, f"{what} must be an integer >= {minimum}, got {text!r}")
    return int(text)


def parse_rate(raw: str, text: str) -> float:
    """``50MB/min`` -> bytes per second."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]+)\s*/\s*([a-z]+)\s*", text.lower())
    if not m or m.group(2) not in _SIZE or m.group(3) not in _TIME:
        raise _bad(raw, f"{text!r} is not a rate (e.g. 50MB/min, 1GiB/h, 2MB/s)")
    return float(m.group(1)) * _SIZE[m.group(2)] / _TIME[m.group(3)]


def parse_inject(raw: str) -> InjectSpec:
    """Parse one ``--inject`` value; raise ``InputError`` naming the spec and the problem."""
    kind, sep, rest = raw.partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS or not sep or not rest.strip():
        raise _bad(raw, f"expected KIND:ARGS with KIND one of {', '.join(KINDS)}")
    args = [a.strip() for a in rest.split(",")]
    n = len(args)
    if kind == "leak":
        if n > 2:
            raise _bad(raw, "expected leak:RATE[,RANK]")
        rate = parse_rate(raw, args[0])
        if rate <= 0:
            raise _bad(raw, "rate must be positive")
        rank = _int(raw, args[1], "RANK") if n == 2 else None
        return InjectSpec(kind, raw, rate_bytes_per_s=rate, rank=rank)
    if kind == "slow-data":
        return _slow_data(raw, args)
    if kind == "slow-link":
        if n > 2:
            raise _bad(raw, "expected slow-link:NODE[,FRACTION] (NODE a node rank, FRACTION of busbw lost)")
        node = _int(raw, args[0], "NODE (a node rank)")
        try:
            frac = float(args[1]) if n == 2 else 0.3
        except ValueError:
            frac = -1.0
        if not 0.0 < frac < 1.0:
            raise _bad(raw, f"FRACTION must be a number between 0 and 1, got {args[1]!r}")
        return InjectSpec(kind, raw, node_rank=node, factor=frac)
    if kind == "stall":
        if n not in (2, 3):
            raise _bad(raw, "expected stall:EVERY,FOR[,RANK] (durations)")
        every, for_s = _duration(raw, args[0]), _duration(raw, args[1])
        if every <= 0 or for_s <= 0:
            raise _bad(raw, "EVERY and FOR must be positive")
        rank = _int(raw, args[2], "RANK") if n == 3 else None
        return InjectSpec(kind, raw, every_s=every, for_s=for_s, rank=rank)
    if kind in ("hang", "crash", "corrupt", "bitflip", "nan"):
        always = kind == "crash" and n >= 2 and args[-1].lower() == "always"
        if always:
            args = args[:-1]
        if len(args) not in (1, 2):
            raise _bad(raw, f"expected {kind}:AT[,RANK]")
        at = _int(raw, args[0], "AT (a step)", 1)
        rank = _int(raw, args[1], "RANK") if len(args) == 2 else None
        return InjectSpec(kind, raw, at_step=at, rank=rank, always=always)
    if kind == "slow-rank" and n == 4:
        every, for_s = _duration(raw, args[2]), _duration(raw, args[3])
        if not 0 < for_s < every:
            raise _bad(raw, "need 0 < FOR < EVERY")
        spec = parse_inject(f"{kind}:{args[0]},{args[1]}")
        return InjectSpec(kind, raw, rank=spec.rank, factor=spec.factor, every_s=every, for_s=for_s)
    if n != 2 and not (kind == "slow-rank" and n == 3):
        what = "FACTOR[,AT] or slow-rank:R,FACTOR,EVERY,FOR" if kind == "slow-rank" else "SECONDS"
        raise _bad(raw, f"expected {kind}:R,{what}")
    rank = _int(raw, args[0], "R (a rank)")
    if kind == "slow-rank":
        try:
            factor = float(args[1])
        except ValueError:
            factor = 0.0
        if factor < 1.0:
            raise _bad(raw, f"FACTOR must be a number >= 1, got {args[1]!r}")
        at = _int(raw, args[2], "AT (a step)", 1) if n == 3 else None
        return InjectSpec(kind, raw, rank=rank, factor=factor, at_step=at)
    return InjectSpec(kind, raw, rank=rank, delay_s=_duration(raw, args[1]))


def _slow_data(raw: str, args: list[str]) -> InjectSpec:
    usage = "expected slow-data:every=N,delay=S[,rank=R]"
    kv: dict[str, str] = {}
    for a in args:
        key, eq, value = a.partition("=")
        if not eq or key.strip().lower() not in ("every", "delay", "rank") or key.strip().lower() in kv:
            raise _bad(raw, usage)
        kv[key.strip().lower()] = value.strip()
    if "every" not in kv or "delay" not in kv:
        raise _bad(raw, usage)
    every = _int(raw, kv["every"], "every (steps)", 1)
    delay = _duration(raw, kv["delay"])
    if delay <= 0:
        raise _bad(raw, "delay must be positive")
    rank = _int(raw, kv["rank"], "rank") if "rank" in kv else None
    return InjectSpec("slow-data", raw, rank=rank, every_steps=every, delay_s=delay)


def parse_all(raws: Sequence[str], workload: str) -> tuple[InjectSpec, ...]:
    specs = tuple(parse_inject(r) for r in raws)
    for s in specs:
        allowed = NUMERIC_KINDS.get(s.kind)
        if allowed is not None and workload not in allowed:
            raise _bad(s.raw, f"{s.kind} applies to the {' and '.join(allowed)} workload{'s' if len(allowed) > 1 else ''} only")
    return specs


class Injector:
    """Applies the specs that concern this rank at the hooks the training loop calls."""

    def __init__(
        self,
        specs: Sequence[InjectSpec],
        *,
        rank: int,
        run_dir: Path,
        workload: str,
        emit: Callable[..., None],
        allocate: Callable[[int], Any],
        sleep: Callable[[float], None] = time.sleep,
        node_rank: int | None = None,
    ) -> None:
        self.specs = tuple(s for s in specs if (s.rank is None or s.rank == rank)
                           and (s.node_rank is None or s.node_rank == node_rank))
        self.rank = rank
        self.run_dir = run_dir
        self.workload = workload
        self._emit = emit  # emit(event, step, message, **fields): a heartbeat event
        self._allocate = allocate  # allocate(nbytes) -> an object holding that many bytes
        self._sleep = sleep
        self._leaked: list[Any] = []
        self.leaked_bytes = 0
        self._t0 = time.monotonic()
        self._next_stall: dict[str, float] = {}
        self._step_s = 0.0
        self._done: set[str] = set()

    def of(self, kind: str) -> list[InjectSpec]:
        return [s for s in self.specs if s.kind == kind]

    def announce(self, step: int) -> None:
        for s in self.specs:
            self._emit("inject", step, f"armed {s.raw}", inject={"spec": s.raw, "action": "armed"})
        self._t0 = time.monotonic()
        for s in self.of("stall"):
            self._next_stall[s.raw] = self._t0 + float(s.every_s or 0)

    def _marker(self, spec: InjectSpec) -> Path:
        return self.run_dir / "inject" / f"{rank_device(self.workload, self.rank)}-crash-at{spec.at_step}"

    def before_step(self, step: int) -> None:
        """Called before step ``step`` runs: crash, hang, stall and leak act here."""
        for s in self.of("crash"):
            if s.at_step == step:
                marker = self._marker(s)
                if s.always or not marker.exists():
                    marker.parent.mkdir(parents=True, exist_ok=True)
                    marker.write_text(f"{time.time()}\n")
                    self._emit("inject", step, f"{s.raw}: exiting with status 1",
                               inject={"spec": s.raw, "action": "exit", "exit_code": 1})
                    os._exit(1)
        for s in self.of("hang"):
            if s.at_step == step:
                self._emit("inject", step, f"{s.raw}: rank stops stepping", inject={"spec": s.raw, "action": "hang"})
                while True:  # alive, holding its memory, never stepping again
                    self._sleep(3600.0)
        now = time.monotonic()
        for s in self.of("stall"):
            if now >= self._next_stall[s.raw]:
                self._next_stall[s.raw] = now + float(s.every_s or 0)
                self._sleep(float(s.for_s or 0))
                # the loader stall the plan asked for: counted apart, never against the machine
                self._emit("data_stall", step, f"{s.raw}: waited {float(s.for_s or 0):.3f} s for data",
                           seconds=float(s.for_s or 0), injected=True, inject={"spec": s.raw, "action": "stall"})
        self.leak_tick()

    def leak_tick(self) -> None:
        for s in self.of("leak"):
            target = int(float(s.rate_bytes_per_s or 0) * (time.monotonic() - self._t0))
            # chunks of >= 1 MiB keep the allocation count low while tracking the rate
            if target - self.leaked_bytes >= 2**20:
                n = target - self.leaked_bytes
                self._leaked.append(self._allocate(n))
                self.leaked_bytes += n

    def load_data(self, step: int) -> None:
        """Called inside the data phase of step ``step``: a slow loader sleeps here."""
        for s in self.of("slow-data"):
            if step % int(s.every_steps or 1) == 0:
                self._sleep(float(s.delay_s or 0))

    def _slowing(self, step: int) -> list[InjectSpec]:
        """The slow-rank specs in force at ``step`` now (one from step AT only from there on, a
        recurring one only in its episodes)."""
        elapsed = time.monotonic() - self._t0
        return [s for s in self.of("slow-rank") if (s.at_step is None or step >= s.at_step)
                and (s.every_s is None or elapsed % s.every_s < float(s.for_s or 0))]

    def after_step(self, step: int, compute_s: float) -> None:
        for s in self._slowing(step):
            if s.at_step == step:  # the moment a slow-down begins mid-run
                self._emit("inject", step, f"{s.raw}: rank slowed {s.factor:g} times from step {step}",
                           inject={"spec": s.raw, "action": "slow", "factor": s.factor})
            self._sleep(compute_s * (float(s.factor or 1.0) - 1.0))

    def slowdown(self, step: int = 0) -> float:
        """How many times as long this rank's compute takes at ``step`` (1.0: not slowed). A
        rate the workload measured around its own compute, before ``after_step`` stretched it,
        is this many times too high: the rank must report it divided, as a slow chip would."""
        f = 1.0
        for s in self._slowing(step):
            f *= float(s.factor or 1.0)
        return f

    def before_collective(self) -> None:
        for s in self.of("comm-delay"):
            self._sleep(float(s.delay_s or 0))

    def link_delay(self, took_s: float) -> float:
        """Extra seconds a link-test transfer of this node waits, so that one which took
        ``took_s`` ends FRAC slower in busbw: t / (1 - FRAC) in all."""
        return sum(took_s * float(s.factor or 0.0) / (1.0 - float(s.factor or 0.0)) for s in self.of("slow-link"))

    def corrupt_at(self, step: int) -> bool:
        """The step a ``corrupt`` fault starts at (its ``inject`` event is written then)."""
        return any(s.at_step == step for s in self.of("corrupt"))

    def corrupting(self, step: int) -> bool:
        """This rank's device computes wrong results at ``step``: a faulty chip stays faulty."""
        return any(step >= int(s.at_step or 0) for s in self.of("corrupt"))

    def once_at(self, kind: str, step: int) -> list[InjectSpec]:
        """The ``bitflip``/``nan`` specs that act at ``step``, each only the first time it is
        asked (a replayed step does not repeat an upset)."""
        due = [s for s in self.of(kind) if s.at_step == step and s.raw not in self._done]
        self._done.update(s.raw for s in due)
        return due
