"""The daemon's side of the run folder: a new run's folder, its log, the record of
child processes. The layout itself (a new run's id, paths, the final analysis) is ``soak.runfolder``.

``daemon.json`` names the process groups of the running workloads, so a daemon that resumes
after a crash can end the orphans of its predecessor before starting new ones.

A run folder is 0700 and its ``plan.toml`` 0600 (``soak.runfolder.RUN_DIR_MODE``): the store,
logs, checkpoints and reports inside are the daemon's user's alone, whatever the umask.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import signal
import stat
import time
from pathlib import Path

from soak.config import Plan, dump_plan
from soak.errors import StoreError, mask_url
from soak.runfolder import (
    LOGS,
    PRIVATE_FILE_MODE,
    RUN_DIR_MODE,
    SUBFOLDERS,
    is_run_folder,
    plan_path,
)
from soak.runfolder import run_dir as _run_dir

log = logging.getLogger("soak.daemon")


def make_run_dir(data_dir: str | Path, run_id: str, *, exist_ok: bool) -> Path:
    """The run's folder and its sub-folders. A new run refuses a folder that holds a run
    (its ``plan.toml``, written once the run has started); a folder left by a start that was
    refused before that (a cluster join refused, a store that did not open) is taken again, so
    the corrected command with the same run id runs, and its log keeps what was refused."""
    run_dir = _run_dir(data_dir, run_id)
    root = run_dir.parent
    if run_dir.exists() and not is_run_folder(run_dir):
        raise StoreError(f"run id {run_id}: {run_dir} exists and holds no run; give another --run-id")
    try:
        root.mkdir(parents=True, exist_ok=True)
        run_dir.mkdir(mode=RUN_DIR_MODE, exist_ok=exist_ok or (run_dir.is_dir() and not plan_path(run_dir).exists()))
        # the mode whatever the umask, and on the folder of a run made before soak set it
        run_dir.chmod(RUN_DIR_MODE)
        for sub in SUBFOLDERS:
            (run_dir / sub).mkdir(exist_ok=True)
    except FileExistsError:
        raise StoreError(f"run folder {run_dir} already exists (use --resume {run_id} to continue it)") from None
    except OSError as exc:
        raise StoreError(f"run folder {run_dir}: {exc.strerror or exc}") from None
    if not os.access(run_dir, os.W_OK):
        raise StoreError(f"run folder {run_dir} is not writable")
    return run_dir


def write_plan(run_dir: Path, plan: Plan) -> Path:
    """``plan.toml``, the plan as recorded (``soak.config.recorded_plan``: no password), mode
    0600 from its first byte and written whole (a resume never reads half a plan)."""
    path = plan_path(run_dir)
    _write_private(path, dump_plan(plan))
    return path


def seal_plan(run_dir: Path) -> None:
    """A ``plan.toml`` written before soak masked and closed it (a password in its store URL,
    mode 0644) made as ``write_plan`` makes one, keeping every other byte."""
    path = plan_path(run_dir)
    text = path.read_text(encoding="utf-8")
    sealed = mask_url(text)
    if sealed == text and stat.S_IMODE(path.stat().st_mode) == PRIVATE_FILE_MODE:
        return
    _write_private(path, sealed)
    log.warning("%s: %s", path, "store password masked, mode 0600" if sealed != text else "mode 0600")


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def setup_logging(run_dir: Path, *, max_bytes: int = 10 << 20, backups: int = 5) -> logging.Handler:
    """``logs/daemon.log``, rotated: a 72 h run never fills the disk with its own log."""
    handler = logging.handlers.RotatingFileHandler(
        run_dir / LOGS / "daemon.log", maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("soak", "apscheduler"):
        lg = logging.getLogger(name)
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    return handler


def teardown_logging(handler: logging.Handler) -> None:
    for name in ("soak", "apscheduler"):
        logging.getLogger(name).removeHandler(handler)
    handler.close()


def write_children(run_dir: Path, pgids: list[int]) -> None:
    tmp = run_dir / "daemon.json.tmp"
    tmp.write_text(json.dumps({"daemon_pid": os.getpid(), "workload_pgids": pgids}))
    os.replace(tmp, run_dir / "daemon.json")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _belongs_to(pgid: int, run_dir: Path) -> bool:
    """Only kill a group whose leader's command line names this run folder (pids get reused)."""
    try:
        cmd = Path(f"/proc/{pgid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return str(run_dir) in cmd


def kill_orphans(run_dir: Path, grace_s: float = 10.0) -> list[int]:
    """End workload groups left by a daemon that died; returns the groups signalled."""
    path = run_dir / "daemon.json"
    try:
        pgids = [int(p) for p in json.loads(path.read_text()).get("workload_pgids", [])]
    except (OSError, ValueError):
        return []
    killed = [g for g in pgids if _group_alive(g) and _belongs_to(g, run_dir)]
    for g in killed:
        log.warning("ending workload group %d left by the previous daemon", g)
        os.killpg(g, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while killed and time.monotonic() < deadline and any(_group_alive(g) for g in killed):
        time.sleep(0.1)
    for g in killed:
        if _group_alive(g):
            os.killpg(g, signal.SIGKILL)
    return killed
