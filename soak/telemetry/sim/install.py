"""Install a simulated ``npu-smi`` into a folder."""

from __future__ import annotations

import shlex
import stat
import sys
from pathlib import Path

from soak.errors import InputError
from soak.telemetry.sim.config import SimConfig

CONFIG_NAME = "npu-smi.sim.json"


def config_path(directory: str | Path) -> Path:
    """Where the fleet installed in ``directory`` keeps its config (what its scripts name)."""
    return Path(directory).resolve() / CONFIG_NAME


def install(directory: str | Path, config: SimConfig, server: str | None = None) -> Path:
    """Write ``DIR/npu-smi``, ``DIR/hccn_tool`` and ``DIR/npu-smi.sim.json``; returns npu-smi's path.

    The script runs this interpreter (``sys.executable``) on ``python -m soak.telemetry.sim``,
    with the folder holding the ``soak`` package on PYTHONPATH, so it works from a checkout too.
    ``-S``: the simulator needs the standard library and ``soak`` alone, and a sampler calls it
    every tick; without the site-packages' start-up hooks (``.pth`` files) a call takes about a
    tenth less CPU (``benchmarks/bench_sim_call.py``).

    With ``server`` (a ``serve.SimServer``'s name) the script runs ``client.py`` instead, which
    asks that server and runs the simulator itself only when nothing answers there.
    """
    config_file = config_path(directory)
    folder = config_file.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{directory}: cannot create the folder ({exc.strerror or exc})") from None
    config.save(config_file)
    package_root = Path(__file__).resolve().parents[3]
    if server is None:
        entry = "-S -m soak.telemetry.sim"
    else:  # -I: nothing from the environment or the script's folder shadows the stdlib it uses
        entry = f"-S -I {shlex.quote(str(Path(__file__).with_name('client.py')))} {shlex.quote(server)}"
    for name, extra in (("npu-smi", ""), ("hccn_tool", " --hccn-tool")):
        script = folder / name
        script.write_text(
            "#!/bin/sh\n"
            f"# Simulated {name} (soak sim install). Config: {CONFIG_NAME} beside this file.\n"
            f"PYTHONPATH={shlex.quote(str(package_root))}${{PYTHONPATH:+:$PYTHONPATH}} "
            f"exec {shlex.quote(sys.executable)} {entry} "
            f"--config {shlex.quote(str(config_file))}{extra} \"$@\"\n",
            encoding="utf-8",
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder / "npu-smi"
