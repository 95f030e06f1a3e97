"""Processes a test starts, and waits on them that end the moment one of them dies.

A test that starts a daemon, an agent, an exporter or a server and then polls for what it
should do must not wait out its whole timeout once the process is gone: ``wait_until`` raises
at once, naming the process, how it ended, the tail of its output and of the logs the test
names (the run folder's ``daemon.log``); a timeout shows the same tails.

Output goes to files, never to pipes that nobody reads while the test waits: a chatty child
blocks on a full pipe, and a grandchild that inherited the pipe keeps ``communicate`` waiting
after its parent is gone.

    daemon = procs.start([sys.executable, "-m", "soak", "run", ...], tmp_path, "daemon")
    procs.wait_until(lambda: db.exists(), daemon, 60, logs=[procs.daemon_log(run_dir)])
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Protocol, TypeVar

from soak.runfolder import LOGS

T = TypeVar("T")
TAIL_LINES = 40
TAIL_CHARS = 6000  # a flood of one long line stays readable


class Watched(Protocol):
    """Something a wait gives up on when it ends: a started process, a daemon thread."""

    def ended(self) -> bool:
        """True once it has ended without the test asking it to."""
        ...

    def report(self) -> str:
        """How it stands (running, or how it ended), with the tail of what it wrote."""
        ...


def daemon_log(run_dir: str | os.PathLike[str]) -> Path:
    """The daemon's own log in a run folder (``soak.daemon.runfolder.setup_logging``)."""
    return Path(run_dir) / LOGS / "daemon.log"


def tail(path: str | os.PathLike[str], lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a text file, or why there are none."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return "(no such file)"
    except OSError as exc:
        return f"(unreadable: {exc})"
    kept = "\n".join(text.splitlines()[-lines:])
    if len(kept) > TAIL_CHARS:
        kept = "..." + kept[-TAIL_CHARS:]
    return kept or "(empty)"


def how_it_ended(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


class Proc:
    """A started process, its own process group, its stdout and stderr in files.

    It answers the part of ``subprocess.Popen`` that tests use (``pid``, ``poll``, ``wait``,
    ``send_signal``, ``terminate``, ``kill``, ``returncode``), and ``communicate`` gives the
    text of the two files. Once the test has signalled or waited on it, its exit is expected
    and no longer fails a wait."""

    def __init__(self, popen: subprocess.Popen[bytes], name: str, out: Path, err: Path) -> None:
        self.popen = popen
        self.name = name
        self.out = out
        self.err = err  # the same file as ``out`` when the output is merged
        self.started = time.monotonic()
        self.ending = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    @property
    def label(self) -> str:
        return f"{self.name} (pid {self.pid})"

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        self.ending = True
        return self.popen.wait(timeout)

    def send_signal(self, sig: int) -> None:
        self.ending = True
        self.popen.send_signal(sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL to this process alone (its children live on, as after a crash)."""
        self.send_signal(signal.SIGKILL)

    def kill_group(self, timeout_s: float = 10.0) -> None:
        """SIGKILL to its whole process group, then reap it."""
        self.ending = True
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.popen.wait(timeout_s)

    def stop(self, grace_s: float = 10.0) -> int:
        """SIGTERM to its group; SIGKILL to the group if it is still there after ``grace_s``."""
        self.ending = True
        if self.popen.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                return self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        self.kill_group()
        return self.popen.returncode

    def close(self) -> None:
        """End whatever is left of its group (the teardown of a test, passed or failed)."""
        self.ending = True
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.popen.wait(10)
        except subprocess.TimeoutExpired:  # a process in D state: nothing more a test can do
            pass

    def __enter__(self) -> Proc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_exit(self, timeout_s: float, *, logs: Iterable[str | os.PathLike[str]] = ()) -> int:
        """Its exit status; still running after ``timeout_s``, its group is killed and the test
        fails with the tails of its output and of ``logs``."""
        __tracebackhide__ = True  # pytest shows the test's line, not this one
        self.ending = True
        try:
            return self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pass
        report = self.report()
        self.kill_group()
        raise AssertionError(f"{self.label} still running after {timeout_s:g} s (its group is killed now)\n"
                             + _join([report, *map(_log_report, logs)]))

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """(stdout, stderr) once it has exited (the same text twice when merged); past the
        timeout it is killed and the test fails with their tails."""
        __tracebackhide__ = True
        if timeout is None:
            self.wait()
        else:
            self.wait_exit(timeout)
        return self.stdout_text(), self.stderr_text()

    def stdout_text(self) -> str:
        return self.out.read_text(encoding="utf-8", errors="replace")

    def stderr_text(self) -> str:
        return self.err.read_text(encoding="utf-8", errors="replace")

    def ended(self) -> bool:
        return not self.ending and self.popen.poll() is not None

    def report(self) -> str:
        rc = self.popen.poll()
        state = "running" if rc is None else how_it_ended(rc)
        head = f"{self.label} {state} ({time.monotonic() - self.started:.1f} s after its start)"
        if self.err == self.out:
            return f"{head}\n--- its output ({self.out}):\n{tail(self.out)}"
        parts = [head, f"--- its stderr ({self.err}):\n{tail(self.err)}"]
        if self.out.exists() and self.out.stat().st_size:
            parts.append(f"--- its stdout ({self.out}):\n{tail(self.out)}")
        return "\n".join(parts)


def start(argv: Sequence[str | os.PathLike[str]], folder: str | os.PathLike[str], name: str | None = None, *,
          merge_output: bool = False, out: str | os.PathLike[str] | None = None,
          env: dict[str, str] | None = None, cwd: str | os.PathLike[str] | None = None, **popen_kw: Any) -> Proc:
    """Start ``argv`` in a process group of its own, stdin from /dev/null, stdout to
    ``<folder>/<name>.out`` (or ``out``) and stderr to ``<folder>/<name>.err`` (or into the
    same file with ``merge_output``)."""
    args = [os.fspath(a) for a in argv]
    name = name or _name(args)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = _fresh_stem(folder, name)
    out_path = Path(out) if out is not None else folder / f"{stem}.out"
    err_path = out_path if merge_output else folder / f"{stem}.err"
    with open(out_path, "wb") as o, (nullcontext(o) if merge_output else open(err_path, "wb")) as e:
        popen = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=o, stderr=e, env=env, cwd=cwd,
                                 start_new_session=True, **popen_kw)
    return Proc(popen, name, out_path, err_path)


def run(argv: Sequence[str | os.PathLike[str]], folder: str | os.PathLike[str], name: str | None = None, *,
        timeout_s: float, logs: Iterable[str | os.PathLike[str]] = (), merge_output: bool = False,
        env: dict[str, str] | None = None, cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end, as ``subprocess.run(capture_output=True, text=True)`` does, but
    with its output in files: past ``timeout_s`` its whole group is killed and the test fails
    with the tails of its output and of ``logs``."""
    __tracebackhide__ = True
    proc = start(argv, folder, name, merge_output=merge_output, env=env, cwd=cwd)
    rc = proc.wait_exit(timeout_s, logs=logs)
    return subprocess.CompletedProcess(proc.popen.args, rc, proc.stdout_text(), proc.stderr_text())


def wait_until(cond: Callable[[], T], watched: Watched | Iterable[Watched] = (), timeout_s: float = 60.0, *,
               what: str | None = None, logs: Iterable[str | os.PathLike[str]] = (),
               retry_on: tuple[type[BaseException], ...] = (), interval_s: float = 0.1,
               context: Callable[[], str] | None = None) -> T:
    """Poll ``cond`` until it returns something true, and return that.

    The moment a watched process has ended (one the test did not signal or wait on), fail
    with how it ended and the tails of its output and of ``logs``; past ``timeout_s``, fail
    with the same. An exception of a type in ``retry_on`` counts as "not yet" (the last one is
    shown on failure); any other propagates. ``context`` adds a line of the test's own (the
    page text, the rows seen) to a failure."""
    __tracebackhide__ = True
    items: list[Watched] = [watched] if hasattr(watched, "ended") else list(watched)  # type: ignore[arg-type]
    log_paths = list(logs)
    what = what or _describe(cond)
    t0 = time.monotonic()
    last_error: BaseException | None = None

    def check() -> T | None:
        nonlocal last_error
        try:
            return cond()
        except retry_on as exc:
            last_error = exc
            return None

    while True:
        got = check()
        if got:
            return got
        gone = [w for w in items if w.ended()]
        if gone:
            got = check()  # it may have done what was waited for just before it ended
            if got:
                return got
            head = (f"waiting for {what}: given up {time.monotonic() - t0:.1f} s into a {timeout_s:g} s wait,"
                    " as this ended:")
            shown = gone + [w for w in items if w not in gone]
        elif time.monotonic() - t0 >= timeout_s:
            head = f"waiting for {what}: not within {timeout_s:g} s"
            shown = items
        else:
            time.sleep(interval_s)
            continue
        parts = [head, *(w.report() for w in shown), *map(_log_report, log_paths)]
        if last_error is not None:
            parts.append(f"last error from the condition: {last_error!r}")
        if context is not None:
            parts.append(context())
        raise AssertionError(_join(parts))


def _log_report(path: str | os.PathLike[str]) -> str:
    return f"--- {os.fspath(path)}:\n{tail(path)}"


def _join(parts: Iterable[str]) -> str:
    return "\n".join(p.rstrip("\n") for p in parts)


def _describe(cond: Callable[..., object]) -> str:
    name = getattr(cond, "__name__", "")
    return "the condition" if not name or name == "<lambda>" else name


def _name(args: list[str]) -> str:
    """``python -m soak run ...`` -> ``soak-run``; ``/usr/bin/prometheus ...`` -> ``prometheus``."""
    if len(args) > 2 and args[1] == "-m":
        words = [args[2], *(a for a in args[3:4] if not a.startswith("-") and "/" not in a)]
        return "-".join(words).replace(".", "-")
    return Path(args[0]).name or "proc"


def _fresh_stem(folder: Path, name: str) -> str:
    stem, n = name, 1
    while (folder / f"{stem}.out").exists() or (folder / f"{stem}.err").exists():
        n += 1
        stem = f"{name}-{n}"
    return stem


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped (a killed child nobody waited on is dead for a
    test's purposes)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def free_port() -> int:
    """A TCP port free on loopback now (a server started on it may still race another)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> str:
    """``/metrics`` on loopback ``port``; "" while nothing answers there."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return r.read().decode()
    except OSError:
        return ""
