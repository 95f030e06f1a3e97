"""The terminal's findings during a run: each said once when first found, and said withdrawn
when a later analysis (more data) no longer holds it, so the status line's count never drops
without a word."""

from __future__ import annotations

import io
from types import SimpleNamespace

from soak.daemon.online import OnlineAnalysis


class _Spool:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def event(self, kind: str, **kw) -> None:
        self.events.append((kind, kw))


def _finding(kind: str, device: str, severity: str = "fail") -> dict:
    return {"kind": kind, "device": device, "metric": "step_time_s", "severity": severity,
            "summary": f"{kind} summary", "node": None}


def test_a_finding_no_longer_held_is_said_and_said_again_if_it_returns() -> None:
    out, spool = io.StringIO(), _Spool()
    run = SimpleNamespace(clock=SimpleNamespace(now=lambda: 1_790_000_000.0))
    online = OnlineAnalysis(out)
    hang, creep = _finding("hang", "lm-rank0"), _finding("memory_creep", "npu3-0", "warn")
    online.announce(run, [hang], spool, None)
    online.announce(run, [hang, creep], spool, None)  # the hang again: not said twice
    online.announce(run, [creep], spool, None)  # the hang cleared by more data
    online.announce(run, [creep, hang], spool, None)  # and back
    lines = out.getvalue().splitlines()
    assert lines == [
        "soak: finding [fail] hang on lm-rank0: hang summary",
        "soak: finding [warn] memory_creep on npu3-0: memory_creep summary",
        "soak: finding no longer held: [fail] hang on lm-rank0 (the analysis with more data does not find it)",
        "soak: finding [fail] hang on lm-rank0: hang summary",
    ]
    assert [k for k, _ in spool.events] == ["finding"] * 3


def test_an_info_finding_is_neither_said_nor_said_withdrawn() -> None:
    out, spool = io.StringIO(), _Spool()
    run = SimpleNamespace(clock=SimpleNamespace(now=lambda: 1_790_000_000.0))
    online = OnlineAnalysis(out)
    online.announce(run, [_finding("comm_timeouts", "npu0-0", "info")], spool, None)
    online.announce(run, [], spool, None)
    assert out.getvalue() == ""
