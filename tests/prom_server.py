"""Debian's `prometheus` on loopback for a test, with soak's alert and recording rules loaded:
the dashboards' live test and the cluster's operations test run their queries against it.

One config for both, so that what the dashboards are verified against is what the cluster is
watched with: every target scraped and every rule evaluated each second (a test sees a series
within seconds), storage in the test's folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests import procs

PROMETHEUS = shutil.which("prometheus")
ALERTS = Path(__file__).resolve().parents[1] / "dashboards" / "alerts.yaml"
# the `node` label as deploy/compose/prometheus.yml sets it: the dashboards group by it
NODE_FROM_ADDRESS = '{source_labels: [__address__], regex: "([^:]+)(?::[0-9]+)?", target_label: node}'


def config(jobs: Mapping[str, Iterable[int]], *, node_label: bool = False) -> str:
    """prometheus.yml scraping each job's ports on 127.0.0.1. ``node_label``: a target's host
    becomes its `node` label, as on a deployed node (a cluster agent labels its series itself)."""
    scrapes = ""
    for job, ports in jobs.items():
        targets = ", ".join(f'"127.0.0.1:{p}"' for p in ports)
        scrapes += f"  - job_name: {job}\n    static_configs: [{{targets: [{targets}]}}]\n"
        if node_label:
            scrapes += f"    relabel_configs: [{NODE_FROM_ADDRESS}]\n"
    return f"""\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - {ALERTS}
scrape_configs:
{scrapes}"""


def start(folder: Path, port: int, jobs: Mapping[str, Iterable[int]], *, node_label: bool = False) -> procs.Proc:
    """Prometheus listening on ``127.0.0.1:port`` with :func:`config`, its config, storage and
    output in ``folder``. The caller stops it."""
    assert PROMETHEUS is not None, "the caller skips when prometheus is not installed"
    (folder / "prometheus.yml").write_text(config(jobs, node_label=node_label))
    return procs.start([PROMETHEUS, f"--config.file={folder / 'prometheus.yml'}",
                        f"--storage.tsdb.path={folder / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}",
                        "--log.level=warn"], folder, "prometheus", merge_output=True)
