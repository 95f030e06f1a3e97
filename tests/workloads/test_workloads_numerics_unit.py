"""The numerical checks' decisions on values: agreement, which value is right, the
classification of a disputed computation, spikes, the parameter checksum, tolerances."""

from __future__ import annotations

import math

import pytest

from soak.workloads.numerics import (
    CHIP_TOL,
    SpikeWatch,
    agree,
    alignment_tolerance,
    classify,
    fingerprint,
    rel_diff,
    settle,
    unit_roundoff,
)

NAN = math.nan


def never() -> float:
    raise AssertionError("the reference is needed only without a majority")


def test_agreement_counts_equal_non_finite_values_and_nothing_else():
    assert agree(2.0, 2.0 * (1 + CHIP_TOL / 2), CHIP_TOL)
    assert not agree(2.0, 2.0 * (1 + 4 * CHIP_TOL), CHIP_TOL)
    assert agree(NAN, NAN, 0.0) and not agree(NAN, 1.0, 1.0) and not agree(math.inf, -math.inf, 1.0)
    assert rel_diff(0.0, 0.0) == 0.0 and rel_diff(1.0, NAN) == math.inf


def test_settle_takes_the_majority_and_asks_the_reference_only_without_one():
    assert settle([1.0, 1.0, 1.5], CHIP_TOL, never) == 1.0
    # two chips that differ: the one nearer the CPU float64 value is right
    assert settle([1.0, 1.0625], CHIP_TOL, lambda: 1.0000001) == 1.0
    assert settle([1.0625, 1.0], CHIP_TOL, lambda: 1.0000001) == 1.0
    assert settle([NAN, 2.0], CHIP_TOL, lambda: 2.0) == 2.0


def test_a_chip_whose_rerun_is_wrong_is_chip_one_whose_first_value_only_was_wrong_is_transient():
    finite = lambda v: not math.isfinite(v)  # noqa: E731 - the fault: a non-finite value
    # rank 1's first loss was NaN; every chip's recomputation agrees: transient on rank 1
    assert classify({1: NAN}, [2.0, 2.0], 2.0, CHIP_TOL, finite) == [(1, "transient")]
    # every chip reproduces the NaN: the model's numerics, no chip named
    assert classify({1: NAN}, [NAN, NAN], NAN, CHIP_TOL, finite) == [(None, "everywhere")]
    # rank 1 computes rank 0's batch wrong again on its rerun: its chip
    assert classify({0: 2.0, 1: 2.125}, [2.0, 2.125], 2.0, CHIP_TOL, lambda v: False) == [(1, "chip")]
    # the chips agree now and agree with the first values: nothing wrong
    assert classify({0: 2.0, 1: 2.0}, [2.0, 2.0], 2.0, CHIP_TOL, lambda v: False) == []


def test_a_spike_is_a_stated_multiple_of_the_recent_median_after_the_warm_up():
    w = SpikeWatch(1, multiple=4.0, window=10, warmup=5)
    for v in (2.0, 2.2, 1.8, 2.1):
        assert w.spiky(0, 100.0) is None  # still warming up
        w.push(0, v)
    w.push(0, NAN)  # a non-finite loss is not part of the median
    assert w.spiky(0, 100.0) is None
    w.push(0, 1.9)
    assert w.spiky(0, 7.9) is None
    assert w.spiky(0, 8.0) == pytest.approx(2.0)


def test_the_checksum_changes_with_any_single_flipped_bit():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(64, 8, generator=g), torch.randn(8, generator=g)]
    base = fingerprint(params)
    assert base == fingerprint([p.clone() for p in params]) and 0 <= base < 2**52
    for t, i, bit in ((0, 0, 0), (0, 300, 22), (1, 7, 31)):
        flipped = [p.clone() for p in params]
        flipped[t].view(-1).view(torch.int32)[i] ^= 1 << bit if bit < 31 else -(1 << 31)
        assert fingerprint(flipped) != base
    assert fingerprint(params[::-1]) != base  # the tensors' order counts


def test_tolerances_come_from_the_dtype():
    torch = pytest.importorskip("torch")
    assert unit_roundoff(torch.bfloat16) == 2.0**-8 and unit_roundoff("float16") == 2.0**-11
    assert alignment_tolerance(torch.float32) == pytest.approx(2.0**-12)
    assert alignment_tolerance("bfloat16") == pytest.approx(2.0**-4)


class _Hb:
    def __init__(self) -> None:
        self.events: list[dict] = []
        self.numeric_checks = self.sdc_mismatches = 0

    def event(self, event: str, step: int, message: str | None = None, **fields) -> None:
        self.events.append({"event": event, "step": step, "message": message, **fields})


class _Ctx:
    rank, world_size, distributed = 0, 1, False

    def __init__(self) -> None:
        self.hb = _Hb()


class _Trainer:
    """Recomputations answer from tables: (step -> loss) on the chip and on the CPU."""

    def __init__(self, chip: dict[int, float], cpu: dict[int, float]) -> None:
        self.chip, self.cpu = chip, cpu

    def device_loss(self, step: int, rank: int) -> float:
        return self.chip.get(step, 2.0)

    def reference_loss(self, step: int, rank: int) -> float:
        return self.cpu.get(step, 2.0)


@pytest.mark.parametrize("chip, cpu, classification, suspect", [
    ({}, {}, "transient", 0),  # the rerun on the same chip is back to normal
    ({30: 9.0}, {30: 2.0}, "chip", 0),  # the chip repeats it, the CPU does not
    ({30: 9.0}, {30: 9.0}, "everywhere", None),  # the CPU too: the data's or the model's
])
def test_a_loss_spike_is_classified_by_its_rank(chip, cpu, classification, suspect):
    from soak.workloads.numerics import Numerics, Options

    ctx = _Ctx()
    num = Numerics(ctx, _Trainer(chip, cpu), Options(check_every=0, spike_multiple=4.0, spike_window=20,
                                                    spike_warmup=20))
    for step in range(1, 30):
        assert num.after_backward(step, 2.0 + 0.01 * (step % 3), 1.0)
    assert ctx.hb.events == []
    assert num.after_backward(30, 9.0, 1.0)  # the update is applied: every rank applies the same one
    (ev,) = ctx.hb.events
    assert (ev["event"], ev["step"], ev["loss"], ev["multiple"]) == ("loss_spike", 30, 9.0, 4.0)
    assert ev["median"] == pytest.approx(2.01)
    assert (ev["classification"], ev["suspect_rank"]) == (classification, suspect)


def test_a_nan_loss_with_a_finite_gradient_norm_is_still_reported_by_its_rank():
    from soak.workloads.numerics import Numerics, Options

    ctx = _Ctx()
    num = Numerics(ctx, _Trainer({}, {}), Options(check_every=0))
    assert num.after_backward(3, NAN, 1.0)
    (ev,) = ctx.hb.events
    assert (ev["event"], ev["what"], ev["value"], ev["suspect_rank"]) == ("nonfinite", "loss", "nan", 0)
