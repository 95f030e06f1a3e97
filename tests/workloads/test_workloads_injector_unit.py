"""The injector's hooks in-process, on a fake clock: which rank, how long, how much."""

from __future__ import annotations

import re

import pytest

import soak.workloads.inject as inj
from soak.workloads.inject import Injector, parse_inject


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.slept.append(round(s, 6))
        self.t += s


@pytest.fixture
def clock(monkeypatch):
    c = FakeClock()
    monkeypatch.setattr(inj.time, "monotonic", c.monotonic)
    return c


def make(specs, rank, clock, tmp_path, events=None, allocs=None):
    events = [] if events is None else events
    allocs = [] if allocs is None else allocs
    i = Injector([parse_inject(s) for s in specs], rank=rank, run_dir=tmp_path, workload="lm",
                 emit=lambda ev, st, msg, **fields: events.append((ev, st, msg)),
                 allocate=lambda n: allocs.append(n) or n, sleep=clock.sleep)
    i.announce(0)
    return i


def test_slow_rank_and_comm_delay_hit_only_their_rank(clock, tmp_path):
    specs = ["slow-rank:1,3", "comm-delay:1,2.5"]
    r0 = make(specs, 0, clock, tmp_path)
    r0.after_step(1, 0.1)
    r0.before_collective()
    assert clock.slept == []
    r1 = make(specs, 1, clock, tmp_path)
    r1.after_step(1, 0.1)
    r1.before_collective()
    assert clock.slept == [0.2, 2.5]  # factor 3 -> two extra step times


def test_a_slow_rank_from_a_step_on_is_fast_before_it_and_marks_the_moment(clock, tmp_path):
    events: list = []
    r1 = make(["slow-rank:1,3,5"], 1, clock, tmp_path, events=events)
    for step in range(1, 7):
        r1.after_step(step, 0.1)
    assert clock.slept == [0.2, 0.2]  # steps 5 and 6 only
    assert events[-1] == ("inject", 5, "slow-rank:1,3,5: rank slowed 3 times from step 5")
    assert [e for e in events if e[0] == "inject"] == [("inject", 0, "armed slow-rank:1,3,5"), events[-1]]
    assert (r1.slowdown(4), r1.slowdown(5)) == (1.0, 3.0)


def test_a_slowed_rank_reports_its_throughput_slowed_too(clock, tmp_path):
    from soak.workloads.common import slowed_rates

    # the workload timed its own compute before the injection stretched it three times:
    # the rank did a third of the work per second and must not look 3x faster than its peers
    slow, fast = make(["slow-rank:1,3"], 1, clock, tmp_path), make(["slow-rank:1,3"], 0, clock, tmp_path)
    fields = {"loss": 2.0, "tokens_per_s": 900.0, "tflops": 6.0}
    assert slowed_rates(fields, slow.slowdown()) == {"loss": 2.0, "tokens_per_s": 300.0, "tflops": 2.0}
    assert slowed_rates(fields, fast.slowdown()) is fields


def test_a_recurring_slow_rank_is_slow_only_in_its_episodes(clock, tmp_path):
    # three times slower for 4 s of every 12 s from the start of training: the steps at
    # 1, 5, 13 and 15 s are slowed, those at 6 and 11 s are not, nor is another rank
    r1 = make(["slow-rank:1,3,12s,4s"], 1, clock, tmp_path)
    r0 = make(["slow-rank:1,3,12s,4s"], 0, clock, tmp_path)
    t0 = clock.t
    seen = []
    for at in (1.0, 3.9, 6.0, 11.0, 13.0, 15.5):
        clock.t = t0 + at
        before = len(clock.slept)
        seen.append((at, r1.slowdown()))
        r1.after_step(1, 0.1)
        r0.after_step(1, 0.1)
        assert len(clock.slept) - before == (1 if seen[-1][1] > 1 else 0)
    assert seen == [(1.0, 3.0), (3.9, 3.0), (6.0, 1.0), (11.0, 1.0), (13.0, 3.0), (15.5, 3.0)]
    assert clock.slept == [0.2] * 4


def test_leak_follows_the_rate_in_chunks(clock, tmp_path):
    allocs: list[int] = []
    i = make(["leak:60MB/min"], 0, clock, tmp_path, allocs=allocs)  # 1 MB/s
    for _ in range(10):
        clock.t += 0.5
        i.before_step(1)
    assert 5_000_000 - 2**20 < i.leaked_bytes <= 5_000_000  # lags the rate by < 1 chunk
    assert sum(allocs) == i.leaked_bytes
    assert all(n >= 2**20 for n in allocs)  # no allocation per step for small rates


def test_stall_period_is_measured_from_stall_start(clock, tmp_path):
    i = make(["stall:10s,2s"], 0, clock, tmp_path)
    starts = []
    for _ in range(250):
        clock.t += 0.1
        before = len(clock.slept)
        i.before_step(1)
        if len(clock.slept) > before:
            starts.append(round(clock.t - 2.0 - 1000.0, 1))
    assert starts == [10.0, 20.0]
    assert clock.slept == [2.0, 2.0]


def test_crash_marker_makes_it_once_per_run_folder(clock, tmp_path, monkeypatch):
    exits = []
    monkeypatch.setattr(inj.os, "_exit", lambda code: exits.append(code))
    events: list = []
    make(["crash:3"], 0, clock, tmp_path, events).before_step(3)
    make(["crash:3"], 0, clock, tmp_path, events).before_step(3)
    assert exits == [1]
    make(["crash:3,always"], 0, clock, tmp_path, events).before_step(3)
    make(["crash:3,1"], 0, clock, tmp_path, events).before_step(3)  # other rank's crash
    assert exits == [1, 1]
    assert (tmp_path / "inject" / "lm-rank0-crash-at3").exists()


def test_numerical_faults_act_on_their_rank_a_faulty_chip_stays_faulty_an_upset_acts_once(clock, tmp_path):
    specs = ("corrupt:5,1", "bitflip:7,1", "nan:9")
    on0, on1 = (make(specs, r, clock, tmp_path) for r in (0, 1))
    assert [on1.corrupting(s) for s in (4, 5, 6, 500)] == [False, True, True, True]
    assert not any(on0.corrupting(s) for s in (5, 6, 500))  # rank 1's chip only
    assert on1.corrupt_at(5) and not on1.corrupt_at(6)
    assert [s.raw for s in on1.once_at("bitflip", 7)] == ["bitflip:7,1"]
    assert on1.once_at("bitflip", 7) == []  # a replayed step does not repeat the upset
    assert on0.once_at("bitflip", 7) == []
    assert [s.raw for s in on0.once_at("nan", 9)] == ["nan:9"] and [s.raw for s in on1.once_at("nan", 9)] == ["nan:9"]


@pytest.mark.parametrize("spec, words", [
    ("bitflip:0,1", "AT (a step) must be an integer >= 1"),
    ("nan:3,1,2", "expected nan:AT[,RANK]"),
    ("corrupt:3,x", "RANK must be an integer"),
])
def test_a_bad_numerical_fault_is_named(spec, words):
    with pytest.raises(inj.InputError, match=re.escape(words)):
        parse_inject(spec)
