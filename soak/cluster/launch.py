"""``soak cluster launch``: start one agent per host of a hostfile over OpenSSH, stream their
output, stop them all together.

The system ``ssh`` client does the work (keys, agents, ``~/.ssh/config``, jump hosts and known
hosts stay the user's), always in batch mode so a missing key fails instead of prompting. Two
phases, so a cluster never starts half-way: first the plan is copied to a private temporary
folder on every host (``ssh HOST sh -c 'cat > DIR/plan.toml'``: the plan may hold the store's
password, so it travels on stdin and never in an argument), then every agent is started.

Each agent runs under a small remote wrapper (``REMOTE_WRAPPER``) that

- starts ``soak run`` in a process group of its own, writing (unbuffered) to a log the
  wrapper relays, so a closed connection never reaches the agent as a failed write;
- watches the ssh session's stdin: end-of-file means the launcher asked for a stop (it closes
  the stdin of every ssh) or its connection is gone (Ctrl-C, a killed launcher, a cut
  network). Either way the agent gets SIGTERM, as from ``systemctl stop``, and its process
  group SIGKILL if it is still there after the grace period;
- removes the plan's folder when the agent has ended.

Command line equivalent for one host:
``ssh -o BatchMode=yes HOST sh -c '...' soak-cluster DIR GRACE soak run DIR/plan.toml
--nodes N --node-rank R --node-name NAME --rendezvous HOST:PORT --run-id ID``.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

from soak.cluster.hostfile import Host
from soak.config import is_host_port
from soak.errors import ConfigError, InputError, PlanCopyFailed

DEFAULT_RENDEZVOUS_PORT = 29400  # torchrun's documented c10d port
DEFAULT_STOP_GRACE_S = 120  # the daemon's own stop (workload grace, final analysis) fits
COPY_TIMEOUT_S = 60.0
EXIT_SSH_FAILED = PlanCopyFailed.exit_code  # what ssh itself returns when it cannot connect

# Ours go last: for every -o option ssh keeps the first value it sees, so --ssh-option wins.
SSH_DEFAULTS = (
    "BatchMode=yes",
    "StrictHostKeyChecking=accept-new",
    "ConnectTimeout=15",
    # A node that drops off the network ends its ssh within about a minute; the remote side
    # then sees end-of-file and stops the agent.
    "ServerAliveInterval=15",
    "ServerAliveCountMax=4",
)

COPY_SCRIPT = (
    'umask 077 && d=$(mktemp -d "${TMPDIR:-/tmp}/soak-cluster.XXXXXX") '
    '&& cat > "$d/plan.toml" && printf "%s\\n" "$d"'
)

# $1 plan folder, $2 grace seconds, the rest the agent's command line. POSIX sh (dash, bash).
REMOTE_WRAPPER = r"""
dir=$1; grace=$2; shift 2
exec 3<&0 </dev/null
: >"$dir/agent.log"
export PYTHONUNBUFFERED=1
if command -v setsid >/dev/null 2>&1; then
  setsid "$@" >>"$dir/agent.log" 2>&1 3<&- &
else
  "$@" >>"$dir/agent.log" 2>&1 3<&- &
fi
pid=$!
tail -n +1 -f --pid="$pid" "$dir/agent.log" 3<&- &
tailer=$!
(
  while read -r _; do :; done
  kill -s TERM "$pid" 2>/dev/null
  i=0
  while kill -0 "$pid" 2>/dev/null && [ "$i" -lt "$grace" ]; do sleep 1; i=$((i + 1)); done
  kill -s KILL -- "-$pid" 2>/dev/null || kill -s KILL "$pid" 2>/dev/null
) <&3 >/dev/null 2>&1 &
watcher=$!
exec 3<&-
wait "$pid"; rc=$?
kill -s KILL -- "-$pid" 2>/dev/null
wait "$tailer"
kill "$watcher" 2>/dev/null
rm -rf "$dir"
exit "$rc"
"""



@dataclass(frozen=True)
class SshConfig:
    """How to reach the hosts: the user's extra ``-o`` options and identity file."""

    options: tuple[str, ...] = ()
    identity: str | None = None
    ssh: str = "ssh"

    def argv(self, host: Host, remote: str) -> list[str]:
        """``ssh`` with our options, for one remote command line given as one string."""
        cmd = [self.ssh]
        for opt in (*self.options, *SSH_DEFAULTS):
            cmd += ["-o", opt]
        if self.identity:
            cmd += ["-i", self.identity]
        if host.port:
            cmd += ["-p", str(host.port)]
        return [*cmd, "--", host.destination, remote]


@dataclass(frozen=True)
class Launch:
    """Everything one ``soak cluster launch`` decides before it touches a host."""

    hosts: tuple[Host, ...]
    plan: bytes
    rendezvous: str
    run_id: str
    remote_soak: str = "soak"
    agent_args: tuple[str, ...] = ()
    stop_grace_s: int = DEFAULT_STOP_GRACE_S

    def agent_argv(self, host: Host, plan_path: str) -> list[str]:
        return [self.remote_soak, "run", plan_path, "--nodes", str(len(self.hosts)),
                "--node-rank", str(host.rank), "--node-name", host.name,
                "--rendezvous", self.rendezvous, "--run-id", self.run_id, *self.agent_args]

    def remote_command(self, host: Host, plan_dir: str) -> str:
        argv = ["sh", "-c", REMOTE_WRAPPER, "soak-cluster", plan_dir, str(self.stop_grace_s),
                *self.agent_argv(host, f"{plan_dir}/plan.toml")]
        return shlex.join(argv)


def default_rendezvous(first: Host) -> str:
    host = f"[{first.host}]" if ":" in first.host else first.host
    return f"{host}:{DEFAULT_RENDEZVOUS_PORT}"


def check_rendezvous(value: str, source: str) -> str:
    if not is_host_port(value):
        raise InputError(f"{source}: rendezvous must be HOST:PORT, got {value!r}")
    return value


def prepare(hosts: tuple[Host, ...], plan_path: str, *, rendezvous: str | None = None,
            run_id: str | None = None, remote_soak: str = "soak",
            agent_args: Sequence[str] = (), stop_grace_s: int = DEFAULT_STOP_GRACE_S) -> Launch:
    """Read and check the plan here, once, and settle what every agent is told.

    The rendezvous is the flag, else the plan's ``cluster.rendezvous``, else the first host on
    torchrun's port. The run id is the flag, else the plan's ``run.id``, else a new one made
    here: agents left to make their own would each start a different run.
    """
    from soak.config import plan_from_dict
    from soak.runfolder import new_run_id
    from soak.tomlfile import read_toml_bytes

    raw, data = read_toml_bytes(plan_path, "plan", ConfigError)
    cluster = data.get("cluster", {})
    if not isinstance(cluster, dict):
        raise ConfigError(f"plan {plan_path}: cluster must be a table ([cluster])")
    nodes = cluster.get("nodes")
    if nodes is not None and nodes != len(hosts):
        raise ConfigError(f"plan {plan_path}: cluster.nodes = {nodes!r} but the hostfile lists "
                          f"{len(hosts)} host(s)")
    # Everything but [cluster] (the agents' business) is checked here, before any host is
    # touched: a typo found by N agents at once is N copies of one error.
    overlay = {k: v for k, v in data.items() if k != "cluster"}
    if run_id is not None and isinstance(overlay.get("run", {}), dict):
        overlay["run"] = {**overlay.get("run", {}), "id": run_id}
    checked = plan_from_dict(overlay)
    if rendezvous is not None:
        rendezvous = check_rendezvous(rendezvous, "--rendezvous")
    elif cluster.get("rendezvous"):
        rendezvous = check_rendezvous(str(cluster["rendezvous"]),
                                      f"plan {plan_path}: cluster.rendezvous")
    else:
        rendezvous = default_rendezvous(hosts[0])
    if checked.run.db is None:
        _note(f"plan {plan_path} has no run.db: every node keeps a store of its own instead "
              "of joining one run (set run.db to the shared PostgreSQL URL)")
    return Launch(hosts=hosts, plan=raw, rendezvous=rendezvous,
                  run_id=checked.run.id or new_run_id(), remote_soak=remote_soak,
                  agent_args=tuple(agent_args), stop_grace_s=stop_grace_s)


# --- running -----------------------------------------------------------------------------


class Output:
    """Writes whole lines from several threads, each prefixed by its node."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.lock = threading.Lock()

    def line(self, prefix: str, text: str) -> None:
        with self.lock:
            try:
                self.out.write(f"{prefix}{text}\n")
                self.out.flush()
            except (BrokenPipeError, ValueError):
                pass  # the reader went away (| head); the agents go on


def _note(text: str) -> None:
    print(f"soak cluster: {text}", file=sys.stderr, flush=True)


def _status(code: int | None) -> int:
    """An exit status as a shell shows it: killed by signal N is 128 + N."""
    if code is None:
        return EXIT_SSH_FAILED
    return 128 - code if code < 0 else code


def copy_plans(launch: Launch, ssh: SshConfig) -> dict[str, str]:
    """Copy the plan to every host at once; the remote folder of each node by name.

    If any copy fails, the folders already made are removed and PlanCopyFailed names the host.
    """
    results: dict[str, str] = {}
    errors: dict[str, str] = {}

    def copy(host: Host) -> None:
        try:
            out = subprocess.run(ssh.argv(host, f"sh -c {shlex.quote(COPY_SCRIPT)}"),
                                 input=launch.plan, capture_output=True, timeout=COPY_TIMEOUT_S,
                                 start_new_session=True)
        except subprocess.TimeoutExpired:
            errors[host.name] = f"no answer in {COPY_TIMEOUT_S:.0f} s"
            return
        except OSError as exc:
            errors[host.name] = f"cannot run {ssh.ssh}: {exc}"
            return
        lines = out.stdout.decode(errors="replace").strip().splitlines()
        path = lines[-1].strip() if lines else ""
        if out.returncode != 0 or not path.startswith("/"):
            err = out.stderr.decode(errors="replace").strip().splitlines()
            errors[host.name] = (err[-1] if err else f"ssh exited with status {out.returncode}")
        else:
            results[host.name] = path

    threads = [threading.Thread(target=copy, args=(h,), daemon=True) for h in launch.hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        for host in launch.hosts:
            if host.name in results:
                try:
                    subprocess.run(ssh.argv(host, f"rm -rf {shlex.quote(results[host.name])}"),
                                   capture_output=True, timeout=COPY_TIMEOUT_S,
                                   start_new_session=True, check=False)
                except (subprocess.TimeoutExpired, OSError):
                    pass  # a folder left in the host's temporary space; nothing ran
        first = next(h for h in launch.hosts if h.name in errors)
        more = f" (and {len(errors) - 1} more host(s))" if len(errors) > 1 else ""
        raise PlanCopyFailed(f"copying the plan to {first.name} ({first.destination}) failed: "
                             f"{errors[first.name]}{more}; no agent was started")
    return results


@dataclass
class _Agent:
    host: Host
    proc: subprocess.Popen[bytes]
    reader: threading.Thread


def run(launch: Launch, ssh: SshConfig, *, out: IO[str] | None = None) -> int:
    """Start every agent, relay their lines, return the worst exit status.

    The first SIGINT or SIGTERM asks every agent to stop (end-of-file on each ssh's stdin)
    and keeps relaying their last lines; a second one, or an agent still there after the
    grace period, ends the ssh processes, which stops the remote agents the same way.
    """
    printer = Output(out or sys.stdout)
    dirs = copy_plans(launch, ssh)
    signals: list[int] = []
    previous = {sig: signal.signal(sig, lambda s, _f: signals.append(s))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    agents: list[_Agent] = []
    try:
        for host in launch.hosts:
            # A session of its own: Ctrl-C on the terminal reaches the launcher only, which
            # then stops the agents in order instead of every ssh dropping its connection.
            argv = ssh.argv(host, launch.remote_command(host, dirs[host.name]))
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            reader = threading.Thread(target=_relay, args=(proc, f"[{host.name}] ", printer),
                                      daemon=True)
            reader.start()
            agents.append(_Agent(host, proc, reader))
        _note(f"started {len(agents)} agent(s) for run {launch.run_id}, rendezvous "
              f"{launch.rendezvous}")
        _supervise(agents, signals, launch.stop_grace_s)
    finally:
        for agent in agents:  # only reached with live ssh processes on a bug or interrupt
            if agent.proc.poll() is None:
                agent.proc.kill()
                agent.proc.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for agent in agents:
        agent.reader.join(timeout=5)
    statuses = {a.host.name: _status(a.proc.returncode) for a in agents}
    worst = max(statuses.values(), default=0)
    if worst:
        failed = ", ".join(f"{name} {code}" for name, code in statuses.items() if code)
        _note(f"exit status {worst} (non-zero: {failed})")
    return worst


def _relay(proc: subprocess.Popen[bytes], prefix: str, printer: Output) -> None:
    assert proc.stdout is not None
    for raw in proc.stdout:
        printer.line(prefix, raw.decode(errors="replace").rstrip("\r\n"))


def _supervise(agents: Sequence[_Agent], signals: list[int], grace_s: int,
               poll_s: float = 0.1) -> None:
    asked_at: float | None = None
    cut_at: float | None = None
    reported: set[str] = set()
    while True:
        for a in agents:
            code = a.proc.poll()
            if code is not None and a.host.name not in reported:
                reported.add(a.host.name)
                _note(f"{a.host.name} ended with status {_status(code)}")
        if len(reported) == len(agents):
            return
        if signals and asked_at is None:
            asked_at = time.monotonic()
            _note(f"stopping every agent ({signal.Signals(signals[0]).name}); "
                  "again to cut the connections at once")
            for a in agents:
                _close_stdin(a.proc)
        # Past the grace period the remote wrapper has sent SIGKILL already; a connection
        # still open then is a dead network, which only the ssh timeout would end.
        late = asked_at is not None and time.monotonic() - asked_at > grace_s + 15
        if cut_at is None and (len(signals) > 1 or late):
            cut_at = time.monotonic()
            _note("cutting the ssh connections; the remote agents stop on the hang-up")
            for a in agents:
                if a.proc.poll() is None:
                    a.proc.terminate()
        elif cut_at is not None and time.monotonic() - cut_at > 5:
            for a in agents:
                if a.proc.poll() is None:
                    a.proc.kill()
        time.sleep(poll_s)


def _close_stdin(proc: subprocess.Popen[bytes]) -> None:
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
