"""The soak store: SQLAlchemy Core tables (``schema``) and the repository API (``repo``)."""

from __future__ import annotations

from soak.store.cluster import NodeRecord
from soak.store.repo import (
    FINDING_KEYS,
    HOST_DEVICE,
    STEP_TRACE_METRICS,
    BatchWriter,
    EventRecord,
    ExportRows,
    FindingRecord,
    RunRecord,
    Store,
    node_of,
)

__all__ = ["FINDING_KEYS", "HOST_DEVICE", "STEP_TRACE_METRICS", "BatchWriter", "EventRecord", "ExportRows", "FindingRecord", "NodeRecord",
           "RunRecord", "Store", "node_of"]
