"""A real ``soak run`` given a password in its PostgreSQL store URL (and one in ``PGPASSWORD``)
leaves no copy of either anywhere it writes or serves: the run folder, every row of the store,
``/metrics``, the logs, ``soak runs show --format json``, the app's pages and the signed PDF's
text and attachments.

The test server trusts loopback connections: it accepts the planted password and never asks
for it, which is exactly what a planted secret needs (the run works, the password is real
input to every part of soak)."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from soak.cli import main
from soak.store import Store
from tests import procs
from tests.conftest import skip_unless_ci
from tests.report.figures import pdf_text

pytestmark = [pytest.mark.slow, pytest.mark.pg]
ROOT = Path(__file__).parent.parent.parent
APP = str(ROOT / "soak" / "report" / "app.py")
URL_SECRET = "S3cretPW-planted-url"
ENV_SECRET = "S3cretPW-planted-env"
SECRETS = (URL_SECRET, ENV_SECRET)


def _leaks(where: str, data: str | bytes) -> list[str]:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return [f"{where}: {s}" for s in SECRETS if s in text]


def _store_rows(url: str) -> str:
    """Every row of every table of the run's database, as text."""
    from sqlalchemy import create_engine, select

    from soak.store import schema

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return "\n".join(f"{t.name}: {tuple(row)}" for t in schema.metadata.sorted_tables
                             for row in conn.execute(select(t)))
    finally:
        engine.dispose()


def _app_text(db: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """What the app shows on each of its pages for the run's store."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("SOAK_REPORT_DB", db)
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, at.exception
    shown = []
    for page in ("runs", "overview", "events", "manifest"):
        at.sidebar.radio[1].set_value(page).run()
        assert not at.exception, (page, at.exception)
        shown += [m.value for m in at.markdown] + [c.value for c in at.caption] + [c.value for c in at.code]
        shown += [d.value.to_string() for d in at.dataframe] + [t.value.to_string() for t in at.table]
        shown += [str(j.value) for j in at.json]
    assert any("pwc" in s for s in shown), shown[:20]
    return "\n".join(shown)


def test_a_password_in_the_store_url_is_in_no_artifact_of_the_run(tmp_path: Path, db_url: str, capsys,
                                                                    monkeypatch) -> None:
    from pyhanko.pdf_utils.reader import PdfFileReader
    from sqlalchemy.engine import make_url

    from soak.report.verify import read_attachments

    if shutil.which("pdftotext") is None:
        skip_unless_ci("pdftotext not installed (poppler-utils)")
    secret_url = make_url(db_url).set(password=URL_SECRET).render_as_string(hide_password=False)
    data_dir = tmp_path / "runs"
    run_dir = data_dir / "pwc"
    assert main(["keys", "init", "--dir", str(data_dir / "keys")]) == 0
    capsys.readouterr()
    port = procs.free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PGPASSWORD": ENV_SECRET}
    argv = [sys.executable, "-m", "soak", "run", "--db", secret_url, "--backend", "sim", "--sim-chips", "2",
            "--interval", "1s", "--no-preflight", "--listen", f"127.0.0.1:{port}", "--duration", "20m",
            "--time-scale", "60", "--workload", "lm", "--nproc", "1", "--data-dir", str(data_dir),
            "--run-id", "pwc"]
    logs = [procs.daemon_log(run_dir)]
    with procs.start(argv, tmp_path, "agent", env=env) as agent:
        scraped = procs.wait_until(lambda: (lambda m: m if "soak_run_" in m else "")(procs.scrape(port)), agent, 90,
                                   what="the run's /metrics", logs=logs)
        rc = agent.wait_exit(120, logs=logs)
        out, err = agent.stdout_text(), agent.stderr_text()
    assert rc in (0, 1), err
    monkeypatch.setenv("PGPASSWORD", ENV_SECRET)  # the commands below see it too
    assert main(["runs", "show", "pwc", "--db", secret_url, "--format", "json"]) == 0
    shown = capsys.readouterr().out
    assert json.loads(shown)["id"] == "pwc"
    pdf = tmp_path / "pwc.pdf"
    assert main(["report", "pdf", "pwc", "--db", secret_url, "--data-dir", str(data_dir), "-o", str(pdf)]) == 0
    printed = capsys.readouterr()
    text = pdf_text(pdf)
    assert "pwc" in text and "Plan" in text, text[:2000]
    attachments = read_attachments(PdfFileReader(io.BytesIO(pdf.read_bytes())))
    assert attachments, "the PDF has no attachments"

    leaks = _leaks("agent stdout/stderr", out + err) + _leaks("/metrics", scraped)
    leaks += _leaks("runs show --format json", shown) + _leaks("report pdf output", printed.out + printed.err)
    leaks += _leaks("PDF text", text) + _leaks("PDF bytes", pdf.read_bytes())
    for name, blob in attachments.items():
        leaks += _leaks(f"PDF attachment {name}", blob)
    files = [p for p in data_dir.rglob("*") if p.is_file() and p.parent.name != "keys"]
    assert any(p.name == "plan.toml" for p in files) and any(p.name == "daemon.log" for p in files), files
    for p in files:
        leaks += _leaks(str(p.relative_to(data_dir)), p.read_bytes())
    rows = _store_rows(db_url)
    assert "pwc" in rows and "postgres:***@" in rows, rows[:2000]  # the URL is recorded, masked
    leaks += _leaks("store rows", rows)
    leaks += _leaks("app pages", _app_text(secret_url, monkeypatch))
    assert not leaks, leaks
    # what stays of the run on disk is its owner's alone
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((run_dir / "plan.toml").stat().st_mode) == 0o600
    with Store.open(db_url, create=False) as store:
        run = store.get_run("pwc")
        assert run is not None and run.status == "finished", run
        user = make_url(db_url).username
        assert run.plan["run"]["db"] == db_url.replace(f"://{user}@", f"://{user}:***@"), run.plan["run"]
