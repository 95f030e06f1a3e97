"""The waits of tests/procs.py: a process that dies fails the wait at once, with its stderr and
the logs the test names; a timeout shows the same."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from tests import procs


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_process_that_exits_3_fails_the_wait_at_once_with_its_stderr_and_log(tmp_path) -> None:
    log = tmp_path / "daemon.log"
    log.write_text("first line\nERROR store: cannot open sqlite:///nowhere/soak.db\n")
    proc = procs.start(_python("import sys; print('soak: error: the store is gone', file=sys.stderr); sys.exit(3)"),
                       tmp_path, "daemon")
    t0 = time.monotonic()
    with pytest.raises(AssertionError) as info:
        procs.wait_until(lambda: False, proc, timeout_s=60, what="the first stored rows", logs=[log])
    waited = time.monotonic() - t0
    assert waited < 30, waited  # the moment it ended, not after the 60 s timeout
    msg = str(info.value)
    assert msg.startswith("waiting for the first stored rows: given up ")
    assert f"daemon (pid {proc.pid}) exited with status 3" in msg
    assert "soak: error: the store is gone" in msg
    assert "ERROR store: cannot open sqlite:///nowhere/soak.db" in msg and str(log) in msg


def test_a_timeout_shows_the_running_process_and_the_log_tail(tmp_path) -> None:
    with procs.start(_python("import sys, time; print('warming up', file=sys.stderr, flush=True); time.sleep(60)"),
                     tmp_path, "server") as proc:
        procs.wait_until(lambda: proc.err.read_text(), proc, 30)  # it has written its line
        with pytest.raises(AssertionError) as info:
            procs.wait_until(lambda: False, [proc], timeout_s=0.3, what="the health check",
                             logs=[tmp_path / "missing.log"])
    msg = str(info.value)
    assert msg.startswith("waiting for the health check: not within 0.3 s")
    assert f"server (pid {proc.pid}) running" in msg and "warming up" in msg
    assert f"{tmp_path / 'missing.log'}:\n(no such file)" in msg


def test_the_value_is_returned_and_listed_errors_mean_not_yet(tmp_path) -> None:
    calls = []

    def cond() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionRefusedError("not listening yet")
        return "ready"

    assert procs.wait_until(cond, (), 10, retry_on=(OSError,), interval_s=0.01) == "ready"
    with pytest.raises(KeyError):  # not listed: a bug in the test, shown as it is
        procs.wait_until(lambda: {}["x"], (), 10, retry_on=(OSError,))


def test_a_failing_condition_names_its_last_error(tmp_path) -> None:
    def scrape() -> str:
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(AssertionError) as info:
        procs.wait_until(scrape, (), 0.2, retry_on=(OSError,))
    assert "waiting for scrape: not within 0.2 s" in str(info.value)
    assert "last error from the condition: ConnectionRefusedError(111, 'Connection refused')" in str(info.value)


def test_a_process_the_test_stopped_does_not_fail_the_wait(tmp_path) -> None:
    marker = tmp_path / "done"
    with procs.start(_python("import time; time.sleep(60)"), tmp_path, "agent") as stopped:
        stopped.send_signal(signal.SIGTERM)
        stopped.wait(30)
        # a process that made the condition true and then ended is not a failure either
        quick = procs.start(_python(f"open({str(marker)!r}, 'w').close()"), tmp_path, "quick")
        quick.popen.wait(30)
        assert procs.wait_until(marker.exists, [stopped, quick], 10)


def test_killed_by_a_signal_is_named(tmp_path) -> None:
    proc = procs.start(_python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"), tmp_path)
    with pytest.raises(AssertionError, match="killed by SIGKILL"):
        procs.wait_until(lambda: False, proc, 60)


def test_run_kills_a_hung_process_group_and_shows_its_output(tmp_path) -> None:
    code = ("import subprocess, sys, time; print('started', file=sys.stderr, flush=True);"
            f"open({str(tmp_path / 'child.pid')!r}, 'w').write(str(subprocess.Popen(['sleep', '60']).pid));"
            "time.sleep(60)")
    with pytest.raises(AssertionError) as info:
        procs.run(_python(code), tmp_path, "hung", timeout_s=3)
    assert "hung (pid" in str(info.value) and "still running after 3 s" in str(info.value)
    assert "started" in str(info.value)
    child = int((tmp_path / "child.pid").read_text())
    procs.wait_until(lambda: not procs.alive(child), (), 10, what="the child in its group to be killed")
    done = procs.run(_python("import sys; print('out'); print('err', file=sys.stderr); sys.exit(2)"),
                     tmp_path, timeout_s=30)
    assert (done.returncode, done.stdout, done.stderr) == (2, "out\n", "err\n")
