"""What a new run records before its workloads start: the version manifest, and the
preflight self-check, run in a child process."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from typing import Any, TextIO

from soak.daemon.started import StartedRun
from soak.errors import UserError

log = logging.getLogger("soak.daemon")


def record_manifest(run: StartedRun, *, npu_smi: str | None, node: str | None,
                    on_run_row: bool) -> dict[str, Any] | None:
    """The manifest of this host; on the run row too where ``on_run_row``."""
    from soak.manifest import collect_manifest

    try:
        manifest = collect_manifest(npu_smi=npu_smi or "npu-smi")
        if on_run_row:
            run.store.update_run(run.run_id, manifest=manifest)
        return manifest
    except UserError:
        raise
    except Exception as exc:  # the manifest documents the run; it must not stop it
        log.warning("manifest: %s", exc)
        run.store.add_event(run.run_id, "note", ts=run.clock.now(), message=f"manifest failed: {exc}", node=node,
                            detail={"manifest_error": str(exc)})
        return None


def run_preflight(run: StartedRun, *, npu_smi: str | None, node: str | None, out: TextIO) -> str:
    """``soak preflight`` in a child process: torch and the device checks stay out of the
    daemon (its memory stays small for 72 h), and a check that crashes cannot take it down.
    Its status, also stored as a ``preflight`` event."""
    backend = {"sim": "cpu"}.get(run.plan.devices.backend, run.plan.devices.backend)
    argv = [sys.executable, "-m", "soak", "preflight", "--backend", backend, "--run-dir",
            str(run.run_dir), "--format", "json"]
    if npu_smi:
        argv += ["--npu-smi", npu_smi]
    t0 = run.clock.now()
    out.write("soak: preflight ...\n")
    out.flush()
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
        detail = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {
            "status": "error", "error": (r.stderr.strip().splitlines() or ["no output"])[-1]}
    except (OSError, subprocess.TimeoutExpired) as exc:
        detail = {"status": "error", "error": str(exc)}
    status = str(detail.get("status"))
    failed = [c.get("name") for c in detail.get("checks", []) if c.get("status") == "fail"]
    msg = f"preflight {status}" + (f": failed {', '.join(map(str, failed))}" if failed else "")
    run.store.add_event(run.run_id, "preflight", ts=t0, end_ts=run.clock.now(), message=msg, detail=detail,
                        node=node)
    out.write(f"soak: {msg}\n")
    out.flush()
    return status
