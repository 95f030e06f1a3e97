"""Runs the real daemon in its own process with the fake workload (for kill/resume tests).

    python drive_daemon.py PLAN.toml [--resume RUN_ID] [-- FAKE_ARGS...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from soak.config import load_plan
from soak.daemon.lifecycle import Daemon
from soak.errors import UserError

FAKE = Path(__file__).with_name("fake_workload.py")


def main(argv: list[str]) -> int:
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    plan = load_plan(argv[0])
    resume = argv[argv.index("--resume") + 1] if "--resume" in argv else None

    def fake_argv(w, run_dir, attempt, wall_left_s):
        return [sys.executable, str(FAKE), "--run-dir", str(run_dir), "--name", w.name,
                "--duration-s", f"{wall_left_s + 5:.1f}", *extra]

    try:
        return Daemon(plan, resume=resume, argv_factory=fake_argv, progress_every_s=1.0).run()
    except UserError as exc:
        print(f"soak: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
