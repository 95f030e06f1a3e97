"""The one runner for every vendor-tool call (npu-smi, hccn_tool, ...).

Vendor tools misbehave in four ways a plain ``subprocess.run`` does not survive:
they hang (npu-smi waiting on a wedged driver), they leave child processes behind when killed,
they report failure in text while exiting 0 (``dcmi module initialize failed``), and a broken
one can print without end (``subprocess.run`` would hold all of it in memory). So every call here

* starts the child in its own process group and, on timeout, SIGKILLs the whole group
  (grandchildren included) so nothing keeps the pipes open or piles up over a 72 h soak;
* reads at most :data:`MAX_OUTPUT_BYTES` of stdout and stderr together and kills the group
  past that, so a flooding tool costs a few MiB, not the host's memory;
* refuses a tool that another user may replace, as ssh's StrictModes refuses such keys (the
  tool runs as soak's user, root on an Ascend node): the file and every folder up to ``/``
  must be owned by root or soak's user and writable by neither group nor others (a sticky
  folder such as ``/tmp`` excuses its mode, never a file another user owns), and the file
  checked is the file executed (no second search of ``PATH``);
* turns a missing executable, a timeout, too much output, a non-zero exit and a known failure
  text into a :class:`soak.errors.ToolError` with ``kind`` = ``missing`` | ``timeout`` |
  ``output_limit`` | ``exit`` | ``error_text``, which readers turn into a marked gap plus an
  error count (a tool refused as above is ``missing``: it is not run).

Readers take a ``runner`` argument: anything callable as ``runner(argv, timeout_s=None)``
returning a :class:`ToolResult`. :class:`Runner` is the real one; :class:`ReplayRunner`
answers from recorded text (tests, demos) and applies the same error-text checks.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from soak.errors import ToolError

# Texts that mean the call failed even when the exit status is 0. Sources: npu-smi's own
# messages (CANN print module), DCMI initialisation failures after a driver upgrade without
# reboot or for non-root users, a vanished card, and hccn_tool's wrong-device errors.
# Deliberately NOT here: "call drvMngGetConsoleLogLevel failed" - hccn_tool prints that
# warning before perfectly good results.
KNOWN_ERROR_TEXTS: tuple[str, ...] = (
    "dcmi module initialize failed",
    "There is no NPU card on this server.",
    "There is no NPU chip on this card.",
    "Invalid card id.",
    "Error parameter of -i",
    "check uid or mode failed",
    "Device ID is out of the valid range.",
    "Cmd execute failed!",
    "Command execute failed!",
    "Get ipconf failed",
)

log = logging.getLogger("soak.telemetry")

# The most one call may print, stdout and stderr together. The largest real output is the
# ``npu-smi info`` table of a 64-chip A3 node with its process section: tens of kB. 4 MiB is
# ~100 times that and still a small, fixed cost when a broken tool floods.
MAX_OUTPUT_BYTES = 4 * 1024 * 1024
_READ_CHUNK = 64 * 1024

# After the SIGKILL, how long to wait for the child to be reaped. A child stuck in the
# driver (D state) dies only when the driver lets go; we then leave it rather than hang.
_REAP_AFTER_KILL_S = 2.0


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What one tool call printed. Text is decoded as UTF-8 with replacement characters."""

    stdout: str
    stderr: str
    returncode: int
    duration_s: float


def _tool_name(argv: Sequence[str]) -> str:
    return os.path.basename(str(argv[0])) if argv else "?"


def find_error_text(text: str, error_texts: Sequence[str]) -> str | None:
    """The first line of ``text`` that contains one of ``error_texts`` (case-insensitive)."""
    lowered = [t.lower() for t in error_texts]
    for line in text.splitlines():
        low = line.lower()
        if any(t in low for t in lowered):
            return line.strip()
    return None


def check_result(
    argv: Sequence[str], result: ToolResult, error_texts: Sequence[str] = KNOWN_ERROR_TEXTS
) -> ToolResult:
    """Raise ToolError for a known failure text or a non-zero exit; else return ``result``.

    Error text is checked first: it says more than an exit status does.
    """
    tool = _tool_name(argv)
    hit = find_error_text(result.stdout, error_texts) or find_error_text(result.stderr, error_texts)
    if hit is not None:
        raise ToolError(tool, hit, kind="error_text")
    if result.returncode != 0:
        lines = [ln.strip() for ln in result.stderr.splitlines() if ln.strip()]
        if not lines:
            lines = [ln.strip() for ln in result.stdout.splitlines() if ln.strip()]
        last = lines[-1] if lines else "no output"
        raise ToolError(tool, f"exit status {result.returncode}: {last}", kind="exit")
    return result


def trusted_owners() -> frozenset[int]:
    """Who may own a tool soak runs and every folder above it: root and soak's own user."""
    return frozenset({0, os.geteuid()})


def _chain(path: str) -> list[str]:
    """``path`` and every folder above it, up to ``/``."""
    out = [path]
    while (parent := os.path.dirname(out[-1])) != out[-1]:
        out.append(parent)
    return out


def others_may_replace(path: str, owners: frozenset[int] | None = None) -> str | None:
    """Why another user could replace the executable at ``path`` (absolute), or None, as
    OpenSSH's StrictModes asks of a key: the file and every folder up to ``/`` must be owned
    by root or soak's own user and writable by neither group nor others. The sticky bit
    excuses a folder's mode (no one may then remove or rename another's file), never the
    owner of the file itself. A link is followed: the folders that lead to it and those that
    lead to what it names are all checked."""
    owners = trusted_owners() if owners is None else owners
    real = os.path.realpath(path)
    folders = dict.fromkeys(_chain(os.path.dirname(path)) + _chain(os.path.dirname(real)))
    checks = [(real, "the file")] + [(f, "the folder") for f in folders]
    for p, what in checks:
        try:
            st = os.stat(p)
        except OSError:
            return f"{what} {p} cannot be read"
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid not in owners:
            return f"{what} {p} is owned by uid {st.st_uid}, neither root nor soak's user"
        if mode & (stat.S_IWGRP | stat.S_IWOTH) and not (what == "the folder" and mode & stat.S_ISVTX):
            return f"{what} {p} is writable by group or others (mode {mode:04o})"
    return None


def resolve_tool(name: str, path: str | None) -> str | None:
    """The absolute path ``name`` runs as: itself when it holds a ``/``, else the first
    executable regular file of that name in ``path``'s folders (``os.defpath`` when None),
    as the shell's search finds it. None: nowhere."""
    if os.sep in name:
        return os.path.abspath(name)
    for folder in (path if path is not None else os.defpath).split(os.pathsep):
        candidate = os.path.abspath(os.path.join(folder or os.curdir, name))
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is already gone


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    # A grandchild that left the group (setsid) may still hold the write ends: we stop
    # reading rather than wait for it.
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def _kill_and_reap(proc: subprocess.Popen[bytes]) -> None:
    _kill_group(proc)
    _close_pipes(proc)
    try:
        proc.wait(_REAP_AFTER_KILL_S)
    except subprocess.TimeoutExpired:
        log.warning("pid %d did not end %g s after SIGKILL (stuck in the driver?); left behind",
                    proc.pid, _REAP_AFTER_KILL_S)


def _read_bounded(proc: subprocess.Popen[bytes], timeout_s: float,
                  max_output_bytes: int) -> tuple[bytes, bytes, str | None]:
    """stdout and stderr until both close and the child exits, or ``(.., .., kind)`` when the
    call ran past ``timeout_s`` (``timeout``) or printed past ``max_output_bytes``
    (``output_limit``); the caller kills the group then."""
    deadline = time.monotonic() + timeout_s
    chunks: dict[int, list[bytes]] = {}
    total = 0
    with selectors.DefaultSelector() as sel:
        for pipe in (proc.stdout, proc.stderr):
            assert pipe is not None  # both are PIPE
            sel.register(pipe, selectors.EVENT_READ)
            chunks[pipe.fileno()] = []
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return b"", b"", "timeout"
            for key, _events in sel.select(left):
                data = os.read(key.fd, _READ_CHUNK)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                total += len(data)
                if total > max_output_bytes:
                    return b"", b"", "output_limit"
                chunks[key.fd].append(data)
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return b"", b"", "timeout"  # closed its output but kept running
    assert proc.stdout is not None and proc.stderr is not None
    return b"".join(chunks[proc.stdout.fileno()]), b"".join(chunks[proc.stderr.fileno()]), None


def run_tool(
    argv: Sequence[str],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    error_texts: Sequence[str] = KNOWN_ERROR_TEXTS,
    max_output_bytes: int = MAX_OUTPUT_BYTES,
) -> ToolResult:
    """Run ``argv`` with a hard timeout and an output cap and return its output, or raise ToolError.

    ``env`` is the child's complete environment (None: inherit ours).
    Command line equivalent: whatever ``argv`` says; nothing goes through a shell.
    """
    if not argv:
        raise ValueError("run_tool needs a command")
    tool = _tool_name(argv)
    exe = resolve_tool(str(argv[0]), (env if env is not None else os.environ).get("PATH"))
    if exe is None or not os.path.exists(exe):
        raise ToolError(tool, f"not found: {argv[0]}", kind="missing")
    unsafe = others_may_replace(exe)
    if unsafe:
        raise ToolError(tool, f"refused {exe}: {unsafe}, so another user may replace the tool soak runs",
                        kind="missing")
    started = time.monotonic()
    try:
        # the very file checked, never a second search of PATH: what was checked is what runs
        # (every folder above it is root's or ours, so no one else can swap it meanwhile)
        proc = subprocess.Popen(
            [str(a) for a in argv],
            executable=os.path.realpath(exe),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise ToolError(tool, f"not found: {argv[0]}", kind="missing") from None
    except PermissionError:
        raise ToolError(tool, f"not executable: {argv[0]}", kind="missing") from None
    try:
        out, err, failure = _read_bounded(proc, timeout_s, max_output_bytes)
    except BaseException:
        _kill_and_reap(proc)  # e.g. KeyboardInterrupt: never leave a tool running behind us
        raise
    if failure == "timeout":
        _kill_and_reap(proc)
        raise ToolError(tool, f"no answer within {timeout_s:g} s; process group killed", kind="timeout")
    if failure == "output_limit":
        _kill_and_reap(proc)
        raise ToolError(tool, f"printed more than {max_output_bytes} bytes; process group killed",
                        kind="output_limit")
    _close_pipes(proc)
    result = ToolResult(
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        returncode=proc.returncode,
        duration_s=time.monotonic() - started,
    )
    return check_result(argv, result, error_texts)


@dataclass(frozen=True)
class Runner:
    """A configured :func:`run_tool`: default timeout, environment and error texts.

    Readers call ``runner(argv)`` or ``runner(argv, timeout_s=...)``.
    """

    timeout_s: float = 20.0
    env: Mapping[str, str] | None = None
    error_texts: tuple[str, ...] = KNOWN_ERROR_TEXTS
    max_output_bytes: int = MAX_OUTPUT_BYTES

    def __call__(self, argv: Sequence[str], *, timeout_s: float | None = None) -> ToolResult:
        return run_tool(
            argv,
            timeout_s=self.timeout_s if timeout_s is None else timeout_s,
            env=self.env,
            error_texts=self.error_texts,
            max_output_bytes=self.max_output_bytes,
        )


RunnerLike = Callable[..., ToolResult]

Response = str | ToolResult | BaseException


@dataclass
class ReplayRunner:
    """Answers tool calls from recorded output instead of running anything.

    ``responses`` maps the argv after the tool name, joined by single spaces
    (``"info -t usages -i 0"``), to the recorded stdout, a full ToolResult, or an exception
    to raise. Recorded text goes through the same error-text and exit checks as a real call,
    so a recorded ``dcmi module initialize failed`` raises exactly as the real tool would.
    ``calls`` keeps every argv asked for, in order.
    """

    responses: Mapping[str, Response]
    error_texts: tuple[str, ...] = KNOWN_ERROR_TEXTS
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str], *, timeout_s: float | None = None) -> ToolResult:
        self.calls.append(tuple(str(a) for a in argv))
        key = " ".join(str(a) for a in argv[1:])
        if key not in self.responses:
            raise ToolError(_tool_name(argv), f"no recorded answer for {key!r}", kind="failed")
        answer = self.responses[key]
        if isinstance(answer, BaseException):
            raise answer
        result = answer if isinstance(answer, ToolResult) else ToolResult(answer, "", 0, 0.0)
        return check_result(argv, result, self.error_texts)
