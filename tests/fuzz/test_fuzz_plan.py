"""``soak run PLAN.toml`` on thousands of broken plans and profiles: every one is a single
``soak: error:`` line and exit 2 (or a plan good enough to start), never a traceback.

The daemon is replaced by a stand-in that only builds the acceptance profile, which is all a
real daemon reads of the plan before it makes a run folder."""

from __future__ import annotations

import os
import random
import time

import pytest

from soak.config import dump_plan, plan_from_dict, plan_reference
from soak.daemon import lifecycle
from soak.runplan import build_profile
from tests.fuzz.fuzz_helpers import fuzz_cases, fuzz_seed, mutate_bytes, run_cli, toml_value

BASE = {
    "run": {"duration": "30m", "id": "fz", "preflight": False},
    "devices": {"backend": "sim"},
    "sim": {"chips": 2, "scenario": "healthy"},
    "workloads": [{"name": "lm", "size": "tiny", "extra": ["--ckpt-every", "5"]}],
    "faults": {"inject": ["crash:40"]},
    "acceptance": {"thresholds": {"thermal.threshold_c": 90}},
    "exporter": {"listen": ""},
}
PROFILE = """name = "fuzz"
required_runtime_h = 1
severity = { hang = "fail" }
phases = [ { name = "checkpoint", every_s = 600, duration_s = 60 } ]
[thermal]
threshold_c = 95
[memory]
"""


@pytest.fixture
def no_daemon(monkeypatch):
    def run(self: lifecycle.Daemon) -> int:
        build_profile(self.plan)
        return 0

    monkeypatch.setattr(lifecycle.Daemon, "run", run)


def _structured(rng: random.Random, keys: list[str], profile: str) -> str:
    """The base plan with a few keys (known ones, unknown ones, whole sections) replaced."""
    lines = dump_plan(plan_from_dict(BASE)).splitlines()
    for _ in range(rng.randint(1, 3)):
        what = rng.random()
        if what < 0.6:
            section, _, key = rng.choice(keys).partition(".")
            value = toml_value(rng)
            if section == "acceptance" and key == "profile" and rng.random() < 0.5:
                value = f'"{profile}"'
            if section == "workloads[]":
                lines.append(f"[[workloads]]\n{key} = {value}")
            else:
                lines.append(f"[{section}]\n{key} = {value}")
        elif what < 0.8:
            section = rng.choice(["run", "devices", "sim", "jobs", "acceptance", "workloads", "nope"])
            lines = [f"{section} = {toml_value(rng)}"] + lines
        else:
            lines = [f"[[{rng.choice(['run', 'sampling', 'restart'])}]]"] + lines
    # a duplicated table is invalid TOML: fold the appended tables into the file's ones
    return _dedupe("\n".join(lines))


def _dedupe(text: str) -> str:
    tables: dict[str, list[str]] = {}
    order: list[str] = []
    head: list[str] = []
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("[") and not line.startswith("[["):
            current = line
            if current not in tables:
                tables[current] = []
                order.append(current)
            continue
        if line.startswith("[["):
            current = None
            head.append(line)
            continue
        (tables[current] if current else head).append(line)
    out = list(head)
    for t in order:
        seen: dict[str, str] = {}
        for line in tables[t]:
            seen[line.split("=", 1)[0].strip()] = line
        out += [t, *seen.values()]
    return "\n".join(out) + "\n"


def test_fuzzed_plans_and_profiles_are_one_line_errors(tmp_path, no_daemon) -> None:
    seed, cases = fuzz_seed(20260921), fuzz_cases(100)
    rng = random.Random(seed)
    keys = [k for k, _, _ in plan_reference()] + ["run.nope", "acceptance.nope", "sim.nope"]
    plan, profile = tmp_path / "plan.toml", tmp_path / "profile.toml"
    base = _structured(random.Random(0), keys, str(profile)).encode()
    t0 = time.monotonic()
    counts = {0: 0, 1: 0, 2: 0}
    for i in range(cases):
        profile.write_bytes(mutate_bytes(rng, PROFILE.encode()) if rng.random() < 0.5 else PROFILE.encode())
        if rng.random() < 0.5:
            text = _structured(rng, keys, str(profile)).encode()
        else:
            text = mutate_bytes(rng, base)
        plan.write_bytes(text)
        case = f"seed {seed} case {i}: plan {text[:3000]!r}"
        counts[run_cli(["run", str(plan), "--data-dir", str(tmp_path / "runs")], case).rc] += 1
    # both kinds of outcome happen: the fuzzing reaches past the parser into the checks
    assert counts[2] > cases // 4 and counts[0] > 0, counts
    print(f"{cases} plans in {time.monotonic() - t0:.1f} s: {counts}")


@pytest.mark.parametrize("profile", ["/dev/zero", "/dev/null", "/", "FIFO"])
def test_acceptance_profile_that_is_no_regular_file_is_refused_not_read(tmp_path, profile, no_daemon) -> None:
    if profile == "FIFO":  # opening a FIFO for reading would wait for a writer for ever
        profile = str(tmp_path / "fifo")
        os.mkfifo(profile)
    plan = tmp_path / "plan.toml"
    plan.write_text(f'[acceptance]\nprofile = "{profile}"\n[run]\nduration = "1m"\n[exporter]\nlisten = ""\n')
    out = run_cli(["run", str(plan)], profile)
    assert out.rc == 2
    assert out.err == f"soak: error: acceptance.profile {profile}: not a regular file\n"


@pytest.mark.parametrize(("text", "message"), [
    ("[run]\nduration = 1e309\n", "run.duration must be at most 366d, got inf"),
    ("[run]\nduration = nan\n", "run.duration must be greater than 0, got nan"),
    ("[run]\nduration = \"400d\"\n", "run.duration must be at most 366d, got '400d'"),
    ("run = 5\n", "run must be a table"),
    ("[[run]]\n", "run must be a table"),
    ("[run]\ntime_scale = inf\n", "run.time_scale must be a number > 0, got inf"),
    ("x = " + "[" * 3000 + "]" * 3000 + "\n", "not valid TOML: arrays or tables nested too deeply"),
    ("[acceptance]\nthresholds = {\"thermal.threshold_c\" = nan}\n", "acceptance.thresholds must be a table of numbers"),
])
def test_plan_value_that_once_raised_a_traceback_is_one_line(tmp_path, text, message, no_daemon) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(text)
    out = run_cli(["run", str(plan), "--duration", "1m"] if "duration" not in text else ["run", str(plan)], text)
    assert out.rc == 2 and message in out.err, out.err
