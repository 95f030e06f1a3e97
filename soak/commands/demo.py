"""``soak demo``: the whole product in one command, on any machine (no accelerator needed).

An accelerated soak on the simulated Ascend fleet (8 simulated hours in about two minutes),
with two faults planted: an HBM leak on one chip and a crash of the training workload (the
daemon restarts it from its checkpoint). Then the findings, a signed PDF (keys created in the
data folder on first use), its verification, and the command that opens the report app.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from soak import runfolder
from soak.errors import InputError

if TYPE_CHECKING:
    from soak.report.signing import KeyPair

SIM_HOURS = 8.0
LEAK_CHIP = 3
CRASH_STEP = 300
DEMO_READING_S = 240.0  # simulated seconds between two readings, at the default 2 minutes


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo",
        help="accelerated soak on a simulated NPU fleet with faults, then findings and a signed PDF",
        description="Run an accelerated soak (8 simulated hours) on the simulated Ascend fleet with "
        "an HBM leak on one chip and a workload crash, then print the findings, write a signed PDF "
        "and print how to open the report app. Needs no accelerator.",
    )
    p.add_argument("--minutes", type=float, default=2.0, help="wall-clock length of the soak (default: 2)")
    p.add_argument("--lang", choices=("en", "zh"), default="en", help="PDF language (default: en)")
    p.add_argument("--data-dir", default=runfolder.DEFAULT_DATA_DIR,
                   help=f"folder of run folders (default: ./{runfolder.DEFAULT_DATA_DIR})")
    p.add_argument("--chips", type=int, default=8, help="simulated chips (default: 8)")
    p.add_argument("--port", type=int, default=8501, help="port shown for the report app (default: 8501)")
    p.set_defaults(func=run)


def demo_plan(args: argparse.Namespace, run_id: str) -> dict:
    scale = SIM_HOURS * 3600.0 / (args.minutes * 60.0)
    return {
        "run": {
            "duration": f"{SIM_HOURS:g}h",
            "time_scale": scale,
            "data_dir": str(args.data_dir),
            "id": run_id,
            "preflight": False,
        },
        "devices": {"backend": "sim"},
        "sim": {
            "chips": args.chips,
            # HBM grows 800 MB/h on one chip from the first hour: full within the run's horizon.
            "scenario": f"healthy,hbm_creep:rate_mb_h=800,onset_h=1,chips={LEAK_CHIP}",
        },
        "workloads": [{"name": "lm", "size": "tiny", "nproc": 1}],
        # The training process dies once at step 300; the daemon restarts it and it resumes
        # from its checkpoint of step 200 (the tiny model's are every 200 steps).
        "faults": {"inject": [f"crash:{CRASH_STEP}"]},
        # one reading per 4 simulated minutes at most: a shorter demo (a higher time scale)
        # reads faster, so that no detector is blind at its sampling (soak.analysis.sampling)
        "sampling": {"interval": f"{min(1.0, DEMO_READING_S / scale):g}s"},
        "exporter": {"listen": ""},
        "acceptance": {"thresholds": {"required_runtime_h": SIM_HOURS}},
    }


def run(args: argparse.Namespace) -> int:
    if not 0.5 <= args.minutes <= 120:
        raise InputError(f"--minutes {args.minutes}: must be between 0.5 and 120")
    if args.chips < LEAK_CHIP + 1 or args.chips > 64:
        raise InputError(f"--chips {args.chips}: must be between {LEAK_CHIP + 1} and 64")
    if not 0 < args.port < 65536:
        raise InputError(f"--port {args.port}: must be 1-65535")
    if args.lang == "zh":
        # the font the Chinese PDF needs, found before the soak: not a failure after minutes
        from soak.report.fonts import register_cjk_font

        register_cjk_font()
    from soak.config import plan_from_dict
    from soak.daemon.lifecycle import Daemon

    data_dir = Path(args.data_dir)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--data-dir {data_dir}: cannot create it ({exc.strerror or exc})") from None
    run_id = "demo-" + time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    plan = plan_from_dict(demo_plan(args, run_id))
    print(
        f"soak demo: {SIM_HOURS:g} simulated hours on {args.chips} simulated Ascend chips in about "
        f"{args.minutes:g} min; planted: HBM leak on npu{LEAK_CHIP}-0, a workload crash at step {CRASH_STEP}",
        file=sys.stderr,
    )
    keys = demo_keys(data_dir)  # before the soak: a key with a bad mode fails in a second, not after minutes
    Daemon(plan, out=sys.stderr, progress_every_s=10.0).run()  # exit 1 = fail verdict: expected here
    return report(run_id, data_dir, args.lang, args.port, keys)


def demo_keys(data_dir: Path) -> KeyPair:
    """The demo's own key, marked as the demo's, made once in its own folder: the default key
    (``soak keys init``), which signs real runs' reports, is never the demo's."""
    from soak.report.signing import CERT_FILE, DEMO_COMMON_NAME, KEY_FILE, create_keys, load_keypair

    folder = runfolder.demo_keys_dir(data_dir)
    if (folder / KEY_FILE).is_file() and (folder / CERT_FILE).is_file():
        return load_keypair(folder / KEY_FILE, folder / CERT_FILE)
    keys = create_keys(folder, common_name=DEMO_COMMON_NAME, demo=True, force=True)
    print(f"soak demo: created the demo's signing key {keys.key_path} (mode 0600; not for real runs: "
          "soak keys init makes yours)", file=sys.stderr)
    return keys


def report(run_id: str, data_dir: Path, lang: str, port: int, keys: KeyPair | None = None) -> int:
    from soak.report.build import build_pdf
    from soak.report.verify import verify_pdf
    from soak.store import Store

    run_dir = runfolder.run_dir(data_dir, run_id)
    keys = keys or demo_keys(data_dir)
    out = run_dir / runfolder.REPORT / f"soak-report-{run_id}-{lang}.pdf"
    with Store.open(runfolder.db_path(run_dir), create=False) as store:
        built = build_pdf(store, run_id, out, lang=lang, keys=keys)
        run = store.get_run(run_id)
    checked = verify_pdf(built.path, keys.cert_path)

    print()
    print(f"run {run_id}: {run.status if run else 'N/A'}, restarts {run.restarts if run else 'N/A'}, "
          f"verdict {(built.verdict or 'N/A').upper()}")
    doc_findings = _findings(built.path)
    if not doc_findings:
        print("  no findings")
    for f in doc_findings:
        print(f"  [{f.get('severity')}] {f.get('kind')} on {f.get('device')}: {f.get('summary')}")
    print()
    print(f"signed PDF:  {built.path}")
    print(f"verify:      soak verify {built.path} --cert {keys.cert_path}   ({'OK' if checked.ok else 'FAILED'})")
    print(f"report app:  soak report serve --data-dir {data_dir}   then open http://127.0.0.1:{port}/")
    return 0 if checked.ok else 1


def _findings(pdf: Path) -> list[dict]:
    import io
    import json

    from pyhanko.pdf_utils.reader import PdfFileReader

    from soak.report.verify import FINDINGS_NAME, read_attachments

    atts = read_attachments(PdfFileReader(io.BytesIO(pdf.read_bytes())))
    try:
        return list(json.loads(atts.get(FINDINGS_NAME, b"{}")).get("findings", []))
    except ValueError:
        return []
