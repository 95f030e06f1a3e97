"""Numerical checks inside real training: is every chip computing the right numbers?

A chip that computes wrong numbers crashes nothing; it passes every liveness and throughput
check and poisons the training. ``Numerics`` watches a data-parallel training loop:

* **every step**, talking to no other rank: the rank's loss and the gradient norm (the value
  ``clip_grad_norm_`` returns, over the all-reduced gradients). A non-finite loss anywhere
  makes that norm non-finite on every rank alike, so every rank knows it at once; the losses
  are then all-gathered and the NaN named as a ``nonfinite`` event. A loss ``spike_multiple``
  times the median of the rank's last ``spike_window`` losses (after ``spike_warmup`` steps)
  is a ``loss_spike``, classified by its own rank: recomputed on its chip from the same state
  (gone: transient), then on the CPU in float64 (there too: everywhere; not: chip).
* **every ``check_every`` steps** two checks (docs/workloads.md says what each sees):

  - *replica agreement* (``check = "replica"``): before the step's forward, i.e. after the
    previous optimizer step, every replica must hold bit-identical weights; a checksum of every
    parameter's bits is all-gathered. It sees a memory upset or a wrong optimizer update on
    one rank; it cannot see a wrong forward/backward (the gradient all-reduce averages that
    into every replica alike).
  - *cross-chip recompute* (``check = "recompute"``): the batches are synthetic and seeded by
    (seed, step, rank), so rank r computes rank r+1's loss on the same weights; two chips of
    one model running the same kernels agree to the last bits (``CHIP_TOL``). It sees a wrong
    forward on one chip; it cannot see a fault in the backward pass or the optimizer (the
    replica check sees the latter once the weights differ).

**Classification** (the idea of Megatron-Core's rerun state machine): a NaN or a
recompute mismatch is recomputed from the same state (the weights before the optimizer step)
on every chip; where the chips disagree with no majority, a CPU float64 recomputation
decides which is right. A rank whose own recomputation is still wrong is ``"chip"`` (recurs
only there); one whose first value was wrong but whose recomputation is right is
``"transient"``; a wrong value every chip reproduces is ``"everywhere"`` (the model's
numerics, not a chip's). The step whose gradients a fault touched is not applied: training
goes on from the weights before it. A replica mismatch replays the steps since the last
agreeing check from a host copy of that state on every rank; the rank whose weights the
replay does not reproduce is the suspect (``"transient"``: the replay agrees everywhere), and
the replayed, agreeing state is the one training goes on from.

Events follow the heartbeat contract (docs/architecture.md): ``nonfinite``, ``loss_spike``,
``sdc_mismatch`` with ``suspect_rank`` and ``classification``, written by the suspect rank
(rank 0 when no rank is named).
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# Unit roundoff u = 2^-p of each floating dtype (p: significand bits, the implicit one included).
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "bfloat16": 2.0**-8, "float16": 2.0**-11}
# Two chips of one model, the same weights and kernels, the same batch: the loss (reduced in
# float32 in every precision, see lm's forward) agrees to a few roundings of that reduction.
CHIP_TOL = 16 * UNIT_ROUNDOFF["float32"]
DEFAULT_CHECK_EVERY = 100
DEFAULT_SPIKE_MULTIPLE = 4.0
DEFAULT_SPIKE_WINDOW = 100


def unit_roundoff(dtype: Any) -> float:
    """u of a torch dtype or its name (``torch.bfloat16`` -> 2^-8); float32 when unknown."""
    return UNIT_ROUNDOFF.get(str(dtype).removeprefix("torch."), UNIT_ROUNDOFF["float32"])


def alignment_tolerance(dtype: Any) -> float:
    """How far (relative) a device's loss may be from the CPU float64 reference over the first
    steps of training: sqrt(u) of the training precision. Rounding errors of size u reach the
    loss through every layer and AdamW's first updates (sign-like, so they do not shrink);
    sqrt(u) (2.4e-4 float32, 0.0625 bfloat16, 0.022 float16) holds many such roundings and
    still fails a chip whose results are wrong in the leading bits."""
    return math.sqrt(unit_roundoff(dtype))


def rel_diff(a: float, b: float) -> float:
    """|a - b| / max(|a|, |b|); 0 for equal values (non-finite ones included), inf when exactly
    one of them is not finite or their signs of infinity differ."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return 0.0 if _label(a) == _label(b) else math.inf
    scale = max(abs(a), abs(b))
    return 0.0 if scale == 0 else abs(a - b) / scale


def agree(a: float, b: float, tol: float) -> bool:
    return rel_diff(a, b) <= tol


def _label(v: float) -> str:
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else "finite"


def settle(values: Sequence[float], tol: float, reference: Callable[[], float]) -> float:
    """The right value among the chips' ``values`` of one computation: the value a strict
    majority agrees with; without one (two chips that differ, or a split), the one closest to
    ``reference()`` (a CPU float64 recomputation, called only then)."""
    for v in values:
        if sum(agree(v, w, tol) for w in values) * 2 > len(values):
            return v
    ref = reference()
    return min(values, key=lambda v: (rel_diff(v, ref), 0 if math.isfinite(v) else 1))


def classify(originals: dict[int, float], reruns: Sequence[float], right: float, tol: float,
             bad: Callable[[float], bool]) -> list[tuple[int | None, str]]:
    """(suspect rank, classification) of one disputed computation: ``originals`` are the first
    values (rank -> value), ``reruns[k]`` rank k's recomputation from the same state, ``right``
    what ``settle`` chose, ``bad(v)`` whether a value is itself the fault (non-finite, spiky).
    ``[(None, "everywhere")]`` when every chip reproduces a bad value."""
    if bad(right):
        return [(None, "everywhere")]
    out: list[tuple[int | None, str]] = []
    for k, r in enumerate(reruns):
        if not agree(r, right, tol):
            out.append((k, "chip"))
        elif k in originals and not agree(originals[k], right, tol):
            out.append((k, "transient"))
    if len(out) == len(reruns) and all(c == "chip" for _, c in out) and len(reruns) > 1:
        return [(None, "everywhere")]
    return out


def param_bits(p: Any) -> Any:
    """A flat integer view of a parameter's storage (its bits, writable in place)."""
    import torch

    view = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}[p.element_size()]
    return p.detach().reshape(-1).view(view)


def fingerprint(params: Iterable[Any]) -> int:
    """A checksum of the parameters' bits, below 2^52 (exact in a float64 all-gather): each
    tensor's bits summed as integers, weighted by the tensor's position. Any single flipped bit
    changes it; it is not a cryptographic hash."""
    import torch

    total = 0
    for i, p in enumerate(params):
        try:
            s = torch.sum(param_bits(p), dtype=torch.int64)
        except RuntimeError:  # a device without an integer reduction of that width: on the host
            s = torch.sum(param_bits(p.detach().cpu()), dtype=torch.int64)
        total += (i + 1) * int(s)
    return total % (1 << 52)


class SpikeWatch:
    """Each rank's recent finite losses; a loss ``multiple`` times their median is a spike."""

    def __init__(self, world: int, multiple: float, window: int, warmup: int) -> None:
        self.multiple, self.warmup = multiple, warmup
        self.recent: list[deque[float]] = [deque(maxlen=max(1, window)) for _ in range(world)]

    def median(self, rank: int) -> float | None:
        r = self.recent[rank]
        return statistics.median(r) if len(r) >= max(1, min(self.warmup, r.maxlen or 1)) else None

    def spiky(self, rank: int, loss: float) -> float | None:
        """The median ``loss`` is a spike against, or None."""
        med = self.median(rank)
        if med is None or not math.isfinite(loss) or med <= 0:
            return None
        return med if loss >= self.multiple * med else None

    def push(self, rank: int, loss: float) -> None:
        if math.isfinite(loss):
            self.recent[rank].append(loss)


class Trainer(Protocol):
    """What ``Numerics`` needs from a data-parallel training loop."""

    def parameters(self) -> Iterable[Any]: ...
    def device_loss(self, step: int, rank: int) -> float: ...  # this chip, current weights
    def reference_loss(self, step: int, rank: int) -> float: ...  # CPU float64, current weights
    def snapshot(self) -> Any: ...  # host copy of the training state
    def restore(self, snap: Any) -> None: ...
    def train(self, step: int, apply: bool) -> float: ...  # a plain training step (a replay): its loss


@dataclass(frozen=True)
class Options:
    check_every: int = DEFAULT_CHECK_EVERY  # 0: no periodic checks (loss health still on)
    spike_multiple: float = DEFAULT_SPIKE_MULTIPLE
    spike_window: int = DEFAULT_SPIKE_WINDOW
    spike_warmup: int = DEFAULT_SPIKE_WINDOW


class Numerics:
    """The checks of one rank; every method that talks to other ranks is entered by every rank
    at the same step with the same data (the decisions are made on all-gathered values)."""

    def __init__(self, ctx: Any, trainer: Trainer, options: Options) -> None:
        self.ctx = ctx
        self.trainer = trainer
        self.opt = options
        self.rank, self.world = ctx.rank, ctx.world_size
        self.spikes = SpikeWatch(1, options.spike_multiple, options.spike_window, options.spike_warmup)  # this rank's
        self.gather_until = 0  # the losses of steps up to this one are all-gathered (alignment)
        self._snap: tuple[int, Any] | None = None  # (step, host state) of the last agreeing check
        self._record: dict[int, tuple[float | None, bool]] = {}  # step -> (own loss, applied) since
        self.last_losses: list[float] = []  # every rank's loss at the last step

    # -- collectives ------------------------------------------------------------------------

    def gather(self, step: int, values: Sequence[float], what: str = "numerics_gather") -> list[list[float]]:
        """Every rank's ``values`` (one list per rank)."""
        if not self.ctx.distributed:
            return [list(values)]
        import torch
        import torch.distributed as dist

        t = torch.tensor(list(values), dtype=torch.float64, device=self.ctx.device.name)
        out = [torch.empty_like(t) for _ in range(self.world)]
        with self.ctx.watchdog.guard(what, step):
            dist.all_gather(out, t)
        return [o.cpu().tolist() for o in out]

    def _emit(self, suspect: int | None, event: str, step: int, message: str, **fields: Any) -> None:
        if self.rank != (0 if suspect is None else suspect):
            return
        if event == "sdc_mismatch":
            self.ctx.hb.sdc_mismatches += 1
        self.ctx.hb.event(event, step, message, suspect_rank=suspect, **fields)

    def due(self, step: int) -> bool:
        return self.opt.check_every > 0 and step % self.opt.check_every == 0

    # -- replica agreement, before a check step's forward -------------------------------------

    def replicas(self) -> bool:
        """The replica check runs (and keeps its host copy and loss record) at all."""
        return self.opt.check_every > 0 and self.world > 1

    def before_forward(self, step: int) -> None:
        if not self.replicas():
            return
        if self._snap is None:  # the state training starts (or resumes) from
            self._snapshot(step)
        if not self.due(step):
            return
        self.ctx.hb.numeric_checks += 1
        prints = [int(v[0]) for v in self.gather(step, [float(fingerprint(self.trainer.parameters()))])]
        if len(set(prints)) == 1:
            self._snapshot(step)
            return
        self._replica_mismatch(step, prints)

    def _replica_mismatch(self, step: int, prints: list[int]) -> None:
        """Replay the steps since the last agreeing check from its host copy, on every rank, as
        they ran (a step whose update was withheld withheld again). Each rank compares every
        replayed loss with the one it recorded: a rank whose weights an upset changed computed
        its loss on other weights from that step on, and it is the first to differ (the
        others differ only from the step after, once its gradients reached them). An upset
        after the last replayed forward changed no loss: then the one rank whose weights
        differ from the replayed ones is it."""
        since, snap = self._snap or (step - 1, None)
        record = self._record
        self.trainer.restore(snap)
        first = math.inf
        for s in range(since + 1, step):
            recorded, applied = record.get(s, (None, True))
            mine = self.trainer.train(s, applied)
            if recorded is not None and first == math.inf and not agree(mine, recorded, CHIP_TOL):
                first = float(s)
        after = fingerprint(self.trainer.parameters())
        rows = self.gather(step, [float(after), first], "numerics_replay")
        replayed = [int(r[0]) for r in rows]
        firsts = [r[1] for r in rows]
        earliest = min(firsts)
        again = len(set(replayed)) > 1  # the replay diverged too: not a passing upset
        # an upset after the last replayed forward: only its rank's weights differ from the replay
        changed = [k for k in range(self.world) if replayed[k] != prints[k]]
        named = [k for k in range(self.world) if firsts[k] == earliest] if math.isfinite(earliest) else []
        if not math.isfinite(earliest) and not again and len(changed) == 1 < self.world:
            named = changed
        suspect = named[0] if len(named) == 1 < self.world else None
        cls = None if suspect is None else ("chip" if again else "transient")
        if again and self.ctx.distributed:  # go on from one state: a rank not named
            import torch
            import torch.distributed as dist

            src = min(k for k in range(self.world) if k != suspect)
            with self.ctx.watchdog.guard("numerics_resync", step), torch.no_grad():
                for p in self.trainer.parameters():
                    dist.broadcast(p.data, src=src)
        if suspect is not None and math.isfinite(earliest):
            how = (f"rank {suspect}'s loss was the first to differ from the replay, at step {int(earliest)}; "
                   + ("the replay diverged again" if again else "the replayed weights agree"))
        elif suspect is not None:
            how = (f"every loss was reproduced and only rank {suspect}'s weights differ from the replayed ones "
                   "(changed after its last forward); the replayed weights agree")
        else:
            how = "the replay did not settle which rank"
        self._emit(suspect, "sdc_mismatch", step,
                   f"replica check: weights after step {step - 1} differ across ranks ({len(set(prints))} "
                   f"distinct checksums; replayed steps {since + 1}-{step - 1}): {how}",
                   check="replica", error=None, tolerance=0.0, classification=cls)
        self._snapshot(step)

    def _snapshot(self, step: int) -> None:
        self._snap = (step - 1, self.trainer.snapshot())
        self._record = {}

    # -- loss health and cross-chip recompute, after the backward -------------------------------

    def after_backward(self, step: int, loss: float, grad_norm: float) -> bool:
        """Check this step; True when its gradients may be applied (no fault touched them).

        Most steps talk to no other rank: a non-finite loss anywhere makes the all-reduced
        gradient norm non-finite on every rank alike, and a spike is classified by its own rank.
        Only a check step, a non-finite norm or a step whose losses the job needs (precision
        alignment) all-gathers the losses."""
        checking = self.due(step)
        spike = self._spike(step, loss) if math.isfinite(grad_norm) else None
        self.spikes.push(0, loss)
        if not math.isfinite(loss) and math.isfinite(grad_norm):  # never erased, even where no
            # gradient carried it to the other ranks: this rank says so on its own, unclassified
            self.ctx.hb.event("nonfinite", step, f"loss {_label(loss)} on rank {self.rank} at step {step} with a "
                              "finite gradient norm", what="loss", value=_label(loss), suspect_rank=self.rank,
                              classification=None)
        if not (checking or not math.isfinite(grad_norm) or step <= self.gather_until):
            self._keep(step, None if spike else loss, True)
            return True
        recompute = math.nan
        if checking:
            self.ctx.hb.numeric_checks += 1
            recompute = self.trainer.device_loss(step, (self.rank + 1) % self.world)
        rows = self.gather(step, [loss, grad_norm, recompute, 1.0 if spike else 0.0])
        losses = [r[0] for r in rows]
        self.last_losses = losses
        norm = rows[0][1]  # the all-reduced gradients' norm: the same on every rank
        apply = math.isfinite(norm)
        disputes: dict[int, tuple[str, dict[int, float]]] = {}
        for k, v in enumerate(losses):
            if not math.isfinite(v):
                disputes[k] = ("nonfinite", {k: v})
        if checking:
            for k in range(self.world):
                m = rows[(k - 1) % self.world][2]  # rank k-1 computed rank k's batch
                # a spike its rank reported already: the same fault, not a second one
                if k not in disputes and not rows[k][3] and not agree(losses[k], m, CHIP_TOL):
                    disputes[k] = ("recompute", {k: losses[k], (k - 1) % self.world: m})
        if not math.isfinite(norm) and not disputes:
            self._emit(None, "nonfinite", step, f"gradient norm {_label(norm)} at step {step}; every loss finite",
                       what="grad_norm", value=_label(norm), classification=None)
        found: dict[tuple[str, int | None, str], tuple[str, dict[str, Any]]] = {}
        for k in sorted(disputes):
            kind, originals = disputes[k]
            if not self._settle(step, k, kind, originals, found):
                apply = False
        for (kind, suspect, _), (message, fields) in found.items():
            self._emit(suspect, kind, step, message, **fields)
        # what a replay compares with; a step a fault touched is not compared (already reported)
        self._keep(step, None if disputes or spike or not math.isfinite(norm) else loss, apply)
        return apply

    def _keep(self, step: int, loss: float | None, applied: bool) -> None:
        if self.replicas():
            self._record[step] = (loss, applied)

    def _spike(self, step: int, loss: float) -> str | None:
        """This rank's loss against the median of its recent ones; a spike is recomputed from the
        same state on this chip (gone: ``"transient"``), then on the CPU in float64 (there too:
        ``"everywhere"``, the data's or the model's; not there: ``"chip"``). Its classification,
        or None for no spike. Its update is still applied: every rank applies the same one, and
        the gradient clipping bounds what one rank's batch adds to it."""
        med = self.spikes.spiky(0, loss)
        if med is None:
            return None
        multiple = self.spikes.multiple
        again = self.trainer.device_loss(step, self.rank)
        if not (math.isfinite(again) and again >= multiple * med):
            cls = "transient"
        else:
            ref = self.trainer.reference_loss(step, self.rank)
            cls = "everywhere" if ref >= multiple * med else "chip"
        said = {"chip": "recurs on this chip, not on the CPU", "transient": "did not recur on a rerun",
                "everywhere": "recurs on the CPU too"}[cls]
        self.ctx.hb.event("loss_spike", step,
                          f"loss {loss:.4g} on rank {self.rank} at step {step} is >= {multiple:g} x the median "
                          f"{med:.4g} of its last {len(self.spikes.recent[0])} steps: {said}",
                          loss=loss, median=med, multiple=multiple,
                          suspect_rank=None if cls == "everywhere" else self.rank, classification=cls)
        return cls

    def _settle(self, step: int, k: int, kind: str, originals: dict[int, float],
                found: dict[tuple[str, int | None, str], tuple[str, dict[str, Any]]]) -> bool:
        """Recompute rank k's batch on every chip, classify, and put what is found in ``found``
        (one event per kind, suspect and classification: with two ranks a faulty chip spoils
        both recompute pairs); True when the step's gradients may still be applied."""
        mine = self.trainer.device_loss(step, k)
        reruns = [r[0] for r in self.gather(step, [mine], "numerics_rerun")]
        ref_box: list[float] = []

        def reference() -> float:  # the same on every rank: computed once, by rank 0
            if not ref_box:
                local = self.trainer.reference_loss(step, k) if self.rank == 0 else 0.0
                ref_box.append(self.gather(step, [local], "numerics_reference")[0][0])
            return ref_box[0]

        right = settle(reruns, CHIP_TOL, reference)

        def bad(v: float) -> bool:
            return kind == "nonfinite" and not math.isfinite(v)

        verdicts = classify(originals, reruns, right, CHIP_TOL, bad)
        first = originals[k]
        for suspect, cls in verdicts:
            where = f"rank {suspect}" if suspect is not None else "every rank"
            said = {"chip": f"recurs on {where}'s chip only", "transient": "did not recur on a rerun",
                    "everywhere": "recurs on every chip"}[cls]
            key = ("sdc_mismatch" if kind == "recompute" else kind, suspect, cls)
            if kind == "nonfinite":
                found.setdefault(key, (f"loss {_label(first)} on rank {k} at step {step}: {said}",
                                       {"what": "loss", "value": _label(first), "classification": cls}))
            else:
                bad_value = reruns[suspect] if suspect is not None and cls == "chip" else \
                    originals.get(suspect if suspect is not None else k, first)
                error = rel_diff(bad_value, right)
                if key in found and found[key][1]["error"] >= error:
                    continue
                found[key] = (f"recompute check: rank {k}'s loss at step {step} computed on two chips differs; "
                              f"{where}: {error:.3g} (relative) from the settled value > {CHIP_TOL:.3g}, {said}",
                              {"check": "recompute", "error": error, "tolerance": CHIP_TOL, "classification": cls})
        return not verdicts  # nothing wrong after all: a chip that rounded differently
