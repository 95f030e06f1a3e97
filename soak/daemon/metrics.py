"""Run-level Prometheus metrics served by ``soak run`` next to the device metrics.

A collector in the prometheus_client sense: each scrape builds fresh families from the
latest ``RunStatus``, so nothing is left stale when a rank goes away.
Names and labels are the contract in docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import Metric

from exporters.collector import family_of, served_names
from soak.daemon.status import RunStatus

# name -> (type, help), like exporters.collector.FAMILIES: the one list of run metrics.
FAMILIES: dict[str, tuple[str, str]] = {
    "soak_run_info": ("gauge", "The soak run served here."),
    "soak_run_elapsed_seconds": ("gauge", "Run time elapsed (run time line)."),
    "soak_run_remaining_seconds": ("gauge", "Run time left (run time line)."),
    "soak_run_restarts": ("counter", "Workload restarts in this run."),
    "soak_run_step": ("gauge", "Last global step of the rank."),
    "soak_run_step_time_seconds": ("gauge", "Last step time of the rank."),
    "soak_run_tokens_per_second": ("gauge", "Throughput of the rank (lm)."),
    "soak_run_last_heartbeat_timestamp_seconds": ("gauge", "Time of the rank's last heartbeat."),
    "soak_run_findings": ("gauge", "Findings so far by kind and severity."),
    "soak_run_verdict_pass": ("gauge", "1 while the run passes so far, 0 once it fails."),
    "soak_node_clock_offset_seconds": ("gauge", "A cluster node's clock minus the store's, last measured."),
    "soak_finding_active": ("gauge", "1 while the run's latest analysis holds this finding (this node's, or the "
                                     "peer comparison's where this node judges)."),
    "soak_run_verdict_so_far": ("gauge", "Each judged criterion of the run so far: 1 met, 0 missed."),
    "soak_link_busbw_gbps": ("gauge", "Bus bandwidth (GB/s) between this node and the peer in the last link test."),
    "soak_link_test_timestamp_seconds": ("gauge", "Time of the last link test this node took part in (run time line)."),
    "soak_rank_compute_seconds": ("gauge", "The rank's last step time outside the collectives."),
    "soak_cluster_nodes": ("gauge", "Nodes of the cluster run in each status (served by the node that judges)."),
    "soak_run_ettr_ratio": ("gauge", "Effective training time ratio so far: productive over the time so far less "
                                     "injected faults (served by the node that judges)."),
    "soak_run_lost_seconds": ("gauge", "Time so far in which the job did not train productively, by cause (run time "
                                       "line; served by the node that judges)."),
    "soak_run_failures": ("gauge", "Unexpected failures of the machine so far, by cause (served by the node that "
                                   "judges)."),
    # seconds, Prometheus's base unit (promtool's lint): Grafana shows them as hours or days
    "soak_run_node_test_seconds": ("gauge", "Node-seconds under test so far: the node-hours times 3600 (served by "
                                            "the node that judges)."),
    "soak_numeric_checks": ("counter", "Numerical checks the workloads ran on the chip so far, passed or not "
                                             "(check \"all\": a rank counts its checks together)."),
    "soak_numeric_mismatches": ("counter", "Wrong results (and NaN/Inf losses, loss spikes) the workloads' "
                                                 "numerical checks found on the chip, by check; device \"\" where no "
                                                 "chip was named."),
    "soak_run_node_mttf_lower90_seconds": ("gauge", "One-sided 90% lower bound on a node's mean time to failure so "
                                                  "far, 2T / chi2(0.90; 2r+2) (served by the node that judges)."),
}
METRIC_NAMES = served_names(FAMILIES)
# served only by a node of a cluster run (the links and nodes by status by its judging node)
CLUSTER_ONLY = frozenset({"soak_node_clock_offset_seconds", "soak_link_busbw_gbps",
                          "soak_link_test_timestamp_seconds", "soak_cluster_nodes"})


def _family(name: str, labels: list[str]) -> Metric:
    return family_of(FAMILIES, name, labels)


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
        info = _family("soak_run_info", ["run_id", "workload", "verdict"])
        info.add_metric([rid, st.workload, st.verdict], 1)
        yield info
        for name, value in (("soak_run_elapsed_seconds", st.elapsed_s),
                            ("soak_run_remaining_seconds", st.remaining_s),
                            ("soak_run_restarts", st.restarts)):
            g = _family(name, ["run_id"])
            g.add_metric([rid], value)
            yield g
        yield from _run_families(st)
        per_rank = [
            ("soak_run_step", lambda r: r.step),
            ("soak_rank_compute_seconds", lambda r: r.compute_s),
            ("soak_run_step_time_seconds", lambda r: r.step_time_s),
            ("soak_run_tokens_per_second", lambda r: r.tokens_per_s),
            ("soak_run_last_heartbeat_timestamp_seconds", lambda r: r.last_heartbeat_ts),
        ]
        for name, get in per_rank:
            g = _family(name, ["run_id", "rank", "workload"])
            for r in st.ranks:
                value = get(r)
                if value is not None:  # unknown stays out, never 0
                    g.add_metric([rid, str(r.rank), r.workload], float(value))
            yield g
        g = _family("soak_run_findings", ["run_id", "kind", "severity"])
        for (kind, sev), n in sorted(st.findings.items()):
            g.add_metric([rid, kind, sev], n)
        yield g
        if st.passing is not None:
            g = _family("soak_run_verdict_pass", ["run_id"])
            g.add_metric([rid], 1 if st.passing else 0)
            yield g
        if st.clock_offset_s is not None:  # a cluster node only
            g = _family("soak_node_clock_offset_seconds", ["run_id"])
            g.add_metric([rid], st.clock_offset_s)
            yield g


def _numeric_families(rid: str, counts: Any) -> Iterator[Metric]:
    """Checks per chip and wrong results per chip and check (``soak.analysis.numerics``);
    a workload that checks nothing serves no checks series (never 0)."""
    g = family_of(FAMILIES, "soak_numeric_checks")
    for (node, device), n in sorted(counts.checks.items(), key=str):
        labels = {"run_id": rid, "device": device, "check": "all", **({"node": node} if node else {})}
        g.add_sample("soak_numeric_checks_total", labels, float(n))
    yield g
    g = family_of(FAMILIES, "soak_numeric_mismatches")
    for (node, device, check), n in sorted(counts.mismatches.items(), key=str):
        labels = {"run_id": rid, "device": device, "check": check, **({"node": node} if node else {})}
        g.add_sample("soak_numeric_mismatches_total", labels, float(n))
    yield g


def _run_families(st: RunStatus) -> Iterator[Metric]:
    """What the latest online analysis left: open findings, the criteria so far, the last
    link test, the cluster's nodes by status. A value not known is left out, never 0."""
    rid = st.run_id
    g = family_of(FAMILIES, "soak_finding_active")  # its labels differ by finding
    for f in st.open_findings:
        labels = {"run_id": rid, "kind": f.kind, "severity": f.severity, "device": f.device or "",
                  "metric": f.metric or "", "code": f.code or ""}
        if f.node is not None:  # a peer finding the judge serves names its own node
            labels["node"] = f.node
        g.add_sample("soak_finding_active", labels, 1.0)
    yield g
    g = _family("soak_run_verdict_so_far", ["run_id", "criterion"])
    for name, met in sorted(st.criteria.items()):
        g.add_metric([rid, name], 1.0 if met else 0.0)
    yield g
    if st.link_test is not None:
        g = _family("soak_link_busbw_gbps", ["run_id", "peer"])
        for peer, bw in sorted(st.link_test.busbw_gbps.items()):
            g.add_metric([rid, peer], bw)
        yield g
        g = _family("soak_link_test_timestamp_seconds", ["run_id"])
        g.add_metric([rid], st.link_test.ts)
        yield g
    if st.nodes_by_status:
        g = _family("soak_cluster_nodes", ["run_id", "status"])
        for status, n in sorted(st.nodes_by_status.items()):
            g.add_metric([rid, status], n)
        yield g
    if st.numeric is not None:
        yield from _numeric_families(rid, st.numeric)
    rel = st.reliability
    if rel is not None:
        if rel.ettr is not None:
            g = _family("soak_run_ettr_ratio", ["run_id"])
            g.add_metric([rid], rel.ettr)
            yield g
        for name, values in (("soak_run_lost_seconds", rel.lost_s), ("soak_run_failures", rel.failures)):
            g = _family(name, ["run_id", "cause"])
            for cause, value in sorted(values.items()):
                g.add_metric([rid, cause], float(value))
            yield g
        g = _family("soak_run_node_test_seconds", ["run_id"])
        g.add_metric([rid], rel.node_hours * 3600.0)
        yield g
        if rel.node_mttf_h_lower90 is not None:
            g = _family("soak_run_node_mttf_lower90_seconds", ["run_id"])
            g.add_metric([rid], rel.node_mttf_h_lower90 * 3600.0)
            yield g
