"""Run-level Prometheus metrics served by ``soak run`` next to the device metrics.

A collector in the prometheus_client sense: each scrape builds fresh families from the
latest ``RunStatus``, so nothing is left stale when a rank goes away.
Names and labels are the contract in docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from soak.daemon.status import RunStatus


class RunCollector:
    def __init__(self, status: Callable[[], RunStatus | None]) -> None:
        self.status = status

    def describe(self) -> list[Metric]:
        return []  # unchecked: families depend on the run's state

    def collect(self) -> Iterator[Metric]:
        st = self.status()
        if st is None:
            return
        rid = st.run_id
        info = GaugeMetricFamily("soak_run_info", "The soak run served here.", labels=["run_id", "workload", "verdict"])
        info.add_metric([rid, st.workload, st.verdict], 1)
        yield info
        g = GaugeMetricFamily("soak_run_elapsed_seconds", "Run time elapsed (run time line).", labels=["run_id"])
        g.add_metric([rid], st.elapsed_s)
        yield g
        g = GaugeMetricFamily("soak_run_remaining_seconds", "Run time left (run time line).", labels=["run_id"])
        g.add_metric([rid], st.remaining_s)
        yield g
        c = CounterMetricFamily("soak_run_restarts", "Workload restarts in this run.", labels=["run_id"])
        c.add_metric([rid], st.restarts)
        yield c
        per_rank = [
            ("soak_run_step", "Last global step of the rank.", lambda r: r.step),
            ("soak_run_step_time_seconds", "Last step time of the rank.", lambda r: r.step_time_s),
            ("soak_run_tokens_per_second", "Throughput of the rank (lm).", lambda r: r.tokens_per_s),
            ("soak_run_last_heartbeat_timestamp_seconds", "Time of the rank's last heartbeat.",
             lambda r: r.last_heartbeat_ts),
        ]
        for name, doc, get in per_rank:
            g = GaugeMetricFamily(name, doc, labels=["run_id", "rank", "workload"])
            for r in st.ranks:
                value = get(r)
                if value is not None:  # unknown stays out, never 0
                    g.add_metric([rid, str(r.rank), r.workload], float(value))
            yield g
        g = GaugeMetricFamily("soak_run_findings", "Findings so far by kind and severity.",
                              labels=["run_id", "kind", "severity"])
        for (kind, sev), n in sorted(st.findings.items()):
            g.add_metric([rid, kind, sev], n)
        yield g
        if st.passing is not None:
            g = GaugeMetricFamily("soak_run_verdict_pass", "1 while the run passes so far, 0 once it fails.",
                                  labels=["run_id"])
            g.add_metric([rid], 1 if st.passing else 0)
            yield g
