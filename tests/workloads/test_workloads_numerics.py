"""Numerical checks inside lm's training, with two real gloo ranks: each injected fault is
found on the rank it was injected on, classified, and the run goes on from a good state; a
clean run finds nothing and counts its checks."""

from __future__ import annotations

import math

import pytest
from wl_helpers import Launcher, read_heartbeats, run_module

from soak.workloads.common import HEARTBEAT_KEYS

STEPS, EVERY, AT = 30, 10, 12
NUMERIC_EVENTS = ("sdc_mismatch", "nonfinite", "loss_spike")


def _run(tmp_path_factory, inject: tuple[str, ...], align: int = 0) -> dict[int, list[dict]]:
    lau = Launcher(tmp_path_factory.mktemp("num") / "run")
    lau.run_dir.mkdir()
    try:
        rc = lau.run("lm", timeout=240, steps=STEPS, inject=inject,
                     extra=("--ckpt-every", "0", "--profile-steps", "0", "--check-every", str(EVERY),
                            "--align-steps", str(align)))
        assert rc == 0, lau.log()
        return {r: read_heartbeats(lau.run_dir, "lm", r) for r in (0, 1)}
    finally:
        lau.close()


def _found(lines: dict[int, list[dict]]) -> list[dict]:
    return [r for rank in (0, 1) for r in lines[rank] if r["event"] in NUMERIC_EVENTS]


def _finished(lines: dict[int, list[dict]]) -> None:
    for rank in (0, 1):
        assert all(tuple(r) == HEARTBEAT_KEYS for r in lines[rank])  # every field in the contract
        assert lines[rank][-1]["event"] == "exit" and lines[rank][-1]["message"] == "finished"
        assert lines[rank][-1]["step"] == STEPS


@pytest.mark.slow
def test_a_clean_run_finds_nothing_counts_its_checks_and_aligns(tmp_path_factory):
    lines = _run(tmp_path_factory, (), align=5)
    _finished(lines)
    assert _found(lines) == []
    for rank in (0, 1):
        steps = [r for r in lines[rank] if r["event"] == "step"]
        assert all(r["loss"] is not None and math.isfinite(r["loss"]) and r["grad_norm"] > 0 for r in steps)
        # a replica checksum and a cross-chip recompute at steps 10, 20 and 30
        assert lines[rank][-1]["numeric_checks"] == 2 * (STEPS // EVERY)
    (al,) = [r for r in lines[0] if r["event"] == "alignment"]
    assert al["steps"] == 5 and len(al["device_losses"]) == len(al["reference_losses"]) == 5
    assert al["max_rel_diff"] <= al["tolerance"]
    diffs = [abs(a - b) / b for a, b in zip(al["device_losses"], al["reference_losses"], strict=True)]
    assert max(diffs) == pytest.approx(al["max_rel_diff"])
    assert not [r for r in lines[1] if r["event"] == "alignment"]  # one event for the job


@pytest.mark.slow
def test_a_faulty_chip_is_named_and_classified_chip(tmp_path_factory):
    lines = _run(tmp_path_factory, (f"corrupt:{AT},1",))
    _finished(lines)
    found = _found(lines)
    assert found and all(r["rank"] == 1 for r in found)
    # found at the first check after the fault (step 20) and at every check after it
    assert [r["step"] for r in found] == [20, 30]
    for r in found:
        assert (r["check"], r["suspect_rank"], r["classification"]) == ("recompute", 1, "chip")
        assert r["error"] > r["tolerance"] > 0
    assert lines[1][-1]["sdc_mismatches"] == 2 and lines[0][-1]["sdc_mismatches"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("at, found, how", [
    # inside the window since the last check: rank 1's replayed loss is the first to differ
    (AT, 20, f"first to differ from the replay, at step {AT}"),
    # right before a check, after the last forward: only rank 1's weights differ from the replay
    (20, 20, "only rank 1's weights differ from the replayed ones"),
])
def test_a_flipped_bit_is_a_transient_replica_mismatch_and_the_replicas_agree_again(tmp_path_factory, at, found, how):
    lines = _run(tmp_path_factory, (f"bitflip:{at},1",))
    _finished(lines)
    (ev,) = _found(lines)  # the check at step 30 passes: training went on from agreeing weights
    assert (ev["event"], ev["check"], ev["step"]) == ("sdc_mismatch", "replica", found)
    assert (ev["rank"], ev["suspect_rank"], ev["classification"]) == (1, 1, "transient")
    assert how in ev["message"]
    flip = [r for r in lines[1] if r["event"] == "inject" and r["inject"]["action"] == "bitflip"]
    assert [r["step"] for r in flip] == [at]


@pytest.mark.slow
def test_a_nan_loss_is_a_transient_nonfinite_and_does_not_poison_the_run(tmp_path_factory):
    lines = _run(tmp_path_factory, (f"nan:{AT},1",))
    _finished(lines)
    (ev,) = _found(lines)
    assert (ev["event"], ev["step"], ev["rank"]) == ("nonfinite", AT, 1)
    assert (ev["what"], ev["value"], ev["suspect_rank"], ev["classification"]) == ("loss", "nan", 1, "transient")
    for rank in (0, 1):  # the NaN step's update was withheld: every later loss is finite
        later = [r for r in lines[rank] if r["event"] == "step" and r["step"] > AT]
        assert later and all(r["loss"] is not None and math.isfinite(r["loss"]) for r in later)


@pytest.mark.parametrize("args, words", [
    (["--check-every", "-1"], "--check-every must be >= 0"),
    (["--spike-multiple", "1"], "--spike-multiple must be > 1"),
    (["--align-steps", "-2"], "--align-steps must be >= 0"),
])
def test_bad_numerics_option_is_one_line_exit_2(tmp_path, args, words):
    res = run_module(["-m", "soak.workloads.lm", "--run-dir", str(tmp_path), *args])
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0]


def test_launcher_passes_the_plan_keys_to_lm_only(tmp_path):
    from soak.config import plan_from_dict
    from soak.daemon.launch import default_argv

    plan = plan_from_dict({"numerics": {"check_every": 50, "spike_multiple": 6, "align_steps": 3},
                           "workloads": [{"name": "lm"}, {"name": "gemm"}]})
    argv = default_argv(plan)
    lm, gemm = (argv(w, tmp_path, 0, 60.0) for w in plan.workloads)
    i = lm.index("--check-every")
    assert lm[i:i + 6] == ["--check-every", "50", "--spike-multiple", "6", "--align-steps", "3"]
    assert "--check-every" not in gemm
