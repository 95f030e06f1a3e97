"""The store's frozen records and the keys of its rows: what a read hands back.

A run, its events and findings, a cluster node, the raw rows of an export; and the device
keys the tables share (the ``host`` pseudo-device, ``<workload>-rank<R>`` of a rank's step
metrics). A cluster run's rows name their node in a column of their own, beside the device as
named on that node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# one home (soak.device_names); the store's parts take them from here with its records
from soak.device_names import HOST_DEVICE as HOST_DEVICE
from soak.device_names import rank_device as rank_device

RUN_STATUSES = ("running", "finished", "stopped", "failed")
# The keys of an analysis finding that are columns of ``findings`` (with ``node``, the finding
# record's own field); any other key is detail.
FINDING_KEYS = ("kind", "device", "metric", "start", "end", "severity", "summary")

# The per-rank metrics the steps table gives a trace, in the order of ExportRows.steps[i][2:].
STEP_TRACE_METRICS: tuple[str, ...] = ("step_time_s", "tokens_per_s", "compute_s")


@dataclass(frozen=True)
class RunRecord:
    id: str
    host: str
    workload: str | None
    backend: str | None
    plan: dict[str, Any]
    manifest: dict[str, Any] | None
    started_ts: float
    planned_end_ts: float | None
    ended_ts: float | None
    status: str
    verdict: str | None
    time_scale: float
    restarts: int
    run_dir: str | None
    nodes: int = 1
    generation: int = 0
    plan_digest: str | None = None
    leader: str | None = None  # cluster run: the node holding the judging lease
    lease_until: float | None = None  # store clock
    # cluster run: the node hosting this generation's c10d store and its endpoint, NODE@HOST:PORT
    # (soak.cluster.member.RendezvousHost); None: the plan's, on node rank 0
    rendezvous: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class EventRecord:
    ts: float
    kind: str
    end_ts: float | None = None
    workload: str | None = None
    rank: int | None = None
    message: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    node: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class FindingRecord:
    """A finding as the analysis reports it; ``detail`` keeps its extra keys."""

    kind: str
    device: str | None
    metric: str | None
    start: float | None
    end: float | None
    severity: str | None
    summary: str | None
    detail: dict[str, Any] = field(default_factory=dict)
    node: str | None = None  # the node it is about (cluster runs); its device may be plain or None

    def as_dict(self) -> dict[str, Any]:
        """The analysis' flat shape: the fixed keys plus the detail keys, and ``node`` when
        there is one."""
        out = dict(self.detail)
        out.update({k: getattr(self, k) for k in FINDING_KEYS})
        if self.node is not None:
            out["node"] = self.node
        return out


@dataclass(frozen=True)
class NodeRecord:
    """One node of a cluster run, as it joined and as last seen (unix seconds)."""

    run_id: str
    name: str
    rank: int
    host: str | None
    chips: int | None
    manifest: dict[str, Any] | None
    preflight: str | None
    status: str
    joined_ts: float
    last_seen: float
    ended_ts: float | None
    restarts: int
    listen: str | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ExportRows:
    """A run's raw rows as plain tuples, in ``Store.export_csv``'s order, for a fast exporter."""

    metrics: tuple[str, ...]  # the names of samples[i][3:]
    # (ts, node, device, *metrics): device by device in series order, each in time order;
    # node is None on a single-node run
    samples: list[tuple[Any, ...]]
    # (ts, rank device, step_time_s, tokens_per_s, compute_s), in time order
    steps: list[tuple[Any, ...]]
