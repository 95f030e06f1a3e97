"""A soak outlives its terminal: `soak run … | head -1`, a `tee` or `less` that quits, a
stderr closed from the start. The run goes on to its normal end and verdict, and the log keeps
what the terminal could no longer show."""

from __future__ import annotations

import io
import os
import shlex
import sys
from pathlib import Path

import pytest

from soak.daemon.console import Console
from soak.store import Store
from tests import procs

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


class _Gone(io.StringIO):
    """A stream whose reader has gone after ``ok`` writes, as a pipe to a quit `head` is."""

    def __init__(self, ok: int, error: type[Exception]) -> None:
        super().__init__()
        self.ok, self.error = ok, error

    def write(self, text: str) -> int:
        if self.ok <= 0:
            raise self.error("gone")
        self.ok -= 1
        return super().write(text)


@pytest.mark.parametrize("error", [BrokenPipeError, ValueError, OSError])
def test_console_whose_reader_went_keeps_the_lines_in_the_log(error: type[Exception], caplog) -> None:
    # a pipe whose reader quit (EPIPE), a stream closed under the daemon (ValueError), a
    # terminal hung up (EIO): the run hears nothing of it, its log has every line
    stream = _Gone(1, error)
    console = Console(stream)
    with caplog.at_level("INFO", logger="soak.console"):
        console.write("soak: run r1: lm on 1 process for 15 s\n")
        console.write("soak: finding [fail] ")
        console.write("hang on lm-rank0\n")
        console.flush()
        console.write("soak: run r1 finished, verdict pass\n")
    assert stream.getvalue() == "soak: run r1: lm on 1 process for 15 s\n"
    said = [r.getMessage() for r in caplog.records if r.name == "soak.console" and r.levelname == "INFO"]
    warned = [r.getMessage() for r in caplog.records if r.name == "soak.console" and r.levelname == "WARNING"]
    assert warned == ["the terminal is gone (gone): what the daemon says from now on is in this log only"]
    assert said == ["soak: run r1: lm on 1 process for 15 s", "soak: finding [fail] hang on lm-rank0",
                      "soak: run r1 finished, verdict pass"]


def test_console_without_a_stream_says_all_to_the_log(caplog) -> None:
    # `soak run 2>&-`: Python gives the daemon no sys.stderr at all
    with caplog.at_level("INFO", logger="soak.console"):
        Console(None).write("soak: preflight ...\n")
    assert [r.getMessage() for r in caplog.records if r.name == "soak.console"] == ["soak: preflight ..."]


@pytest.mark.slow
@pytest.mark.parametrize("redirect", ["2>&1 | head -1", "2>&- >&-"], ids=["head-1", "closed"])
def test_soak_run_piped_to_head_ends_with_its_verdict(tmp_path, redirect: str) -> None:
    soak = shlex.join([sys.executable, "-m", "soak", "run", "--duration", "15s", "--workload", "lm",
                       "--backend", "cpu", "--nproc", "1", "--interval", "1s", "--listen", "",
                       "--no-preflight", "--data-dir", str(tmp_path / "runs"), "--run-id", "r1",
                       "--progress-every", "0.5"])
    # soak's own exit status, not head's
    script = f"{soak} {redirect}; exit ${{PIPESTATUS[0]}}"
    run_dir = tmp_path / "runs" / "r1"
    r = procs.run(["bash", "-c", script], tmp_path / "procs", "soak-run", timeout_s=120,
                  logs=[procs.daemon_log(run_dir)], env=_env())
    log = procs.daemon_log(run_dir).read_text(encoding="utf-8")
    with Store.open(run_dir / "soak.db", create=False) as s:
        run = s.get_run("r1")
    assert run.status == "finished", log
    assert r.returncode == (0 if run.verdict == "pass" else 1), (r.returncode, run.verdict, log)
    assert f"soak: run r1 finished, verdict {run.verdict}" in log
    assert "Traceback" not in log and "Broken pipe" not in r.stderr
    if "head" in redirect:
        assert r.stdout == "soak: run r1: lm on 1 process for 15 s\n"
