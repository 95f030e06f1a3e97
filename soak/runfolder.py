"""Where a run's files live: ``<data_dir>/<run_id>/`` and its layout.

The daemon writes this layout and the CLI, the report and the app read it; all of them ask this
module, so a file that moves, moves for everybody. The daemon's process bookkeeping in the same
folder (its log, the workload groups, orphans) is ``soak.daemon.runfolder``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_DATA_DIR = "soak-runs"
"""Folder of run folders when none is given, relative to where soak is started."""

DB_NAME = "soak.db"
PLAN_NAME = "plan.toml"
KEYS = "keys"
"""The signing keys' folder in the data dir (``soak keys init``): never a run id."""
RESERVED_IDS = (KEYS,)
RUN_ID_MAX_CHARS = 64
"""The longest run id: the store's ``runs.id`` and every ``run_id`` column are this wide."""
RUN_DIR_MODE = 0o700
"""A run folder's mode: its store, logs, checkpoints and reports are its owner's alone."""
PRIVATE_FILE_MODE = 0o600
"""A file that is its owner's alone wherever it lies: ``plan.toml``, the signing key."""
HEARTBEATS, CHECKPOINTS, LOGS, PLOG, REPORT = "heartbeats", "checkpoints", "logs", "plog", "report"
SUBFOLDERS = (HEARTBEATS, CHECKPOINTS, LOGS, PLOG, REPORT)
PROFILE = "profile"
"""Profiler captures: the daemon's ``request-<n>.json`` files and the ranks' traces
(``soak.analysis.captures``); made by the first one that writes there."""
CHECKPOINT_GLOB = "*/step_*.pt"  # under checkpoints/: <workload>/step_<N>.pt
CHECKPOINT_TMP_GLOB = "*/.step_*.pt.tmp-*"  # a checkpoint being written (or its writer killed)
STORE_SPOOL = "store-spool.jsonl"
"""What the daemon could not write while its store did not answer, one JSON record a line, in
order (``soak.daemon.spool``); removed once written to the store."""
RESERVE = ".disk-reserve"  # space the daemon holds for its last records (soak.daemon.disk)
SIM = "sim"
"""The simulated fleet's tools (sim backend only), made when the daemon starts and removed
when it ends; a killed daemon's copy is replaced by the next."""
_ANALYSIS = Path(REPORT) / "analysis.json"
_LEGACY_ANALYSIS = Path("analysis.json")  # where runs before report/ kept it


def new_run_id(now: float | None = None, host: str | None = None) -> str:
    """A new run's id, which names its folder: ``<UTC start>-<short host name>``, the name
    cut so the id fits ``RUN_ID_MAX_CHARS`` (a host name may be 63 characters)."""
    host = (host if host is not None else socket.gethostname()).split(".")[0] or "host"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now or time.time()))
    return f"{stamp}-{host}"[:RUN_ID_MAX_CHARS]


def run_dir(data_dir: str | os.PathLike[str], run_id: str) -> Path:
    return Path(data_dir).expanduser() / run_id


def db_path(folder: str | os.PathLike[str]) -> Path:
    """The run's SQLite store, unless the plan's ``run.db`` names another."""
    return Path(folder) / DB_NAME


def plan_path(folder: str | os.PathLike[str]) -> Path:
    """The plan the run started with; ``soak run --resume`` reads it back."""
    return Path(folder) / PLAN_NAME


def store_spool_path(folder: str | os.PathLike[str]) -> Path:
    """Records the daemon could not write while the store was away (``soak.daemon.spool``)."""
    return Path(folder) / STORE_SPOOL


def analysis_path(folder: str | os.PathLike[str]) -> Path:
    return Path(folder) / _ANALYSIS


KEYS_DIR_ENV = "SOAK_KEYS_DIR"


def keys_dir() -> Path:
    """Where ``soak keys init`` puts the signing key by default: ``$SOAK_KEYS_DIR``, else the
    user's own configuration folder (``$XDG_CONFIG_HOME`` or ``~/.config``, ``soak/keys``).
    Outside the data dir: its run folders are copied, archived and handed over with their
    reports, and whoever may read the runs need not hold the key that signs for them."""
    given = os.environ.get(KEYS_DIR_ENV)
    if given:
        return Path(given).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "soak" / KEYS


def data_dir_keys(data_dir: str | os.PathLike[str]) -> Path:
    """The key folder beside the run folders (``<data_dir>/keys``): where releases before this
    one made the signing key, still read when the user's own folder holds none (``keys`` is no
    run id), and where the demo keeps its own marked key."""
    return Path(data_dir) / KEYS


def is_run_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds a run, or what a refused start left of one (its sub-folders):
    anything else in the data dir (the keys, a user's own files) is no run's to take. A
    ``plan.toml`` alone does not make one: a user's working folder holds its plan under that
    name too; a run folder has its sub-folders, made before anything else is written (one of
    them may have been cleaned away since: its logs, say)."""
    folder = Path(folder)
    subs = [(folder / sub).is_dir() for sub in SUBFOLDERS]
    return all(subs) or (any(subs) and plan_path(folder).is_file())


def run_folder_of(path: str | os.PathLike[str]) -> Path | None:
    """The run folder ``path`` lies in (or is), if any: what is there travels with the run's
    data (copied, archived, handed over), so no key belongs there."""
    p = Path(path).expanduser().absolute()
    for folder in (p, *p.parents):
        if folder.is_dir() and is_run_folder(folder):
            return folder
    return None


def demo_keys_dir(data_dir: str | os.PathLike[str]) -> Path:
    """The soak demo's own signing key: apart from the default one, which signs real runs."""
    return data_dir_keys(data_dir) / "demo"


def find_stores(data_dir: str | os.PathLike[str]) -> list[Path]:
    """Every run folder's SQLite store under ``data_dir`` (one level deep), sorted."""
    base = Path(data_dir)
    if not base.is_dir():
        return []
    return sorted(p for p in base.glob(f"*/{DB_NAME}") if p.is_file())


def read_analysis(folder: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """The analysis the daemon saved in the run folder, if any."""
    if not folder:
        return None
    for rel in (_ANALYSIS, _LEGACY_ANALYSIS):
        p = Path(folder) / rel
        if p.is_file():
            try:
                return json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                log.warning("%s: unreadable analysis, re-running the analysis", p)
    return None


def write_analysis(folder: str | os.PathLike[str], analysis: dict) -> Path:
    """``report/analysis.json``: the final analysis the report shows, written atomically (a
    reader sees the old file or the new one, never half of one)."""
    path = analysis_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(analysis, fh, indent=1, sort_keys=True, default=str)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def largest_checkpoint_bytes(folder: str | os.PathLike[str]) -> int:
    """The size of the largest checkpoint in the run folder (0 when none): the space the next
    checkpoint needs while the older ones still exist."""
    sizes = [0]
    for p in (Path(folder) / CHECKPOINTS).glob(CHECKPOINT_GLOB):
        try:
            sizes.append(p.stat().st_size)
        except OSError:  # rotated away meanwhile
            continue
    return max(sizes)


def remove_temp_files(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove the half-written files of the run folder: checkpoints being written when the
    disk filled (or their writer was killed). Returns the files removed."""
    removed = []
    for p in (Path(folder) / CHECKPOINTS).glob(CHECKPOINT_TMP_GLOB):
        try:
            p.unlink()
            removed.append(p)
        except OSError as exc:
            log.warning("%s: cannot remove: %s", p, exc.strerror or exc)
    return removed
