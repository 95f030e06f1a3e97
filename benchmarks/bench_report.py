"""Report benchmark: a 72 h x 16-chip run at 10 s samples (~415 k sample rows).

Measures, on this machine and in one run:
  * the signed PDF end to end (export + digest, analysis, charts, layout, attachments,
    signature), with its parts, against the reference path (``Store.export_csv`` plus
    ``Trace.from_rows(Store.load_trace)``, i.e. without the report's shared fast export);
  * the app's first render of the overview (Streamlit AppTest, cold caches) and of the
    timelines page, against loading every raw sample of one chip as the reference.
Targets: PDF < 20 s, first render < 5 s.

    python benchmarks/bench_report.py [--hours 72] [--chips 16] [--skip-reference]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

T = TypeVar("T")


def timed(label: str, results: dict[str, float], fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    results[label] = time.perf_counter() - t0
    print(f"  {label:<44} {results[label]:8.2f} s", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=72.0)
    ap.add_argument("--chips", type=int, default=16)
    ap.add_argument("--skip-reference", action="store_true", help="skip the slow reference paths")
    args = ap.parse_args()

    from soak.analysis import Trace
    from soak.report.build import build_pdf
    from soak.report.export import export_run
    from soak.report.loader import load_report_data, run_analysis
    from soak.report.pdf import RawData, render_pdf
    from soak.report.signing import create_keys
    from soak.runfolder import db_path
    from soak.store import Store
    from tests.report.synth import write_run

    r: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        tmp_p = Path(tmp)
        run_dir = tmp_p / "runs" / "r-bench"
        run_dir.mkdir(parents=True)
        db = db_path(run_dir)
        print(f"run: {args.chips} chips x {args.hours:g} h at 10 s")
        with Store.open(db) as store:
            shape = timed("write run through the store API", r, write_run, store, "r-bench",
                          chips=args.chips, hours=args.hours, interval_s=10.0, findings=True)
        print(f"  sample rows: {shape.rows:,}; db {db.stat().st_size / 1e6:.0f} MB")
        keys = create_keys(tmp_p / "keys")

        print("PDF (signed, en):")
        with Store.open(db, create=False) as store:
            timed("TOTAL build_pdf", r, build_pdf, store, "r-bench", tmp_p / "r.pdf", keys=keys)
            exp = timed("  part: fast export + arrays", r, export_run, store, "r-bench")
            rec = store.get_run("r-bench")
            analysis = timed("  part: analysis (from arrays)", r, run_analysis, store, rec, exp.arrays)
            data = timed("  part: report data (stats, series)", r, load_report_data, store, "r-bench",
                         analysis=analysis, arrays=exp.arrays)
            timed("  part: charts + layout (reportlab)", r, render_pdf, data, raw=RawData("0" * 64, exp.rows))
            if not args.skip_reference:
                print("reference path (no shared export):")
                timed("  ref: Store.export_csv", r, store.export_csv, "r-bench", tmp_p / "ref.csv")
                same = (tmp_p / "ref.csv").read_bytes() == exp.csv
                print(f"  export byte-identical to Store.export_csv: {same}")
                timed("  ref: Trace.from_rows(Store.load_trace)", r,
                      lambda: Trace.from_rows(store.load_trace("r-bench")))
        print(f"  PDF size: {(tmp_p / 'r.pdf').stat().st_size / 1e6:.1f} MB (raw CSV attached, compressed)")

        print("app (Streamlit AppTest, cold caches):")
        os.environ["SOAK_REPORT_DB"] = str(db)
        from streamlit.testing.v1 import AppTest

        app_path = str(ROOT / "soak" / "report" / "app.py")
        at = AppTest.from_file(app_path, default_timeout=120)
        timed("first render: overview", r, at.run)
        assert not at.exception, at.exception
        at.sidebar.radio(key="page").set_value("timelines")
        timed("first render: timelines (5 charts)", r, at.run)
        assert not at.exception, at.exception
        at.sidebar.radio(key="page").set_value("overview")
        timed("re-render: overview (cached)", r, at.run)
        with Store.open(db, create=False) as store:
            bucketed = timed("  one chip, SQL-bucketed series", r, store.load_samples, "r-bench",
                             device="npu1-1", bucket_s=600)
            raw = timed("  ref: one chip, every raw sample", r, store.load_samples, "r-bench", device="npu1-1")
        print(f"  points per chip: {len(bucketed):,} bucketed vs {len(raw):,} raw")

    pdf_total = r["TOTAL build_pdf"]
    first = r["first render: overview"]
    print()
    print(f"PDF end to end: {pdf_total:.1f} s (target < 20 s): {'OK' if pdf_total < 20 else 'OVER'}")
    print(f"app first render: {first:.1f} s (target < 5 s): {'OK' if first < 5 else 'OVER'}")
    if "  ref: Store.export_csv" in r:
        ref = r["  ref: Store.export_csv"] + r["  ref: Trace.from_rows(Store.load_trace)"]
        ours = r["  part: fast export + arrays"]
        print(f"raw data for digest + analysis: {ours:.1f} s shared export vs {ref:.1f} s reference "
              f"({ref / ours:.1f}x)")
    print(f"load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (shared machines inflate times)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
