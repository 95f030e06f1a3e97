"""The soak store: SQLAlchemy Core tables (``schema``) and the repository API (``repo``)."""

from __future__ import annotations

from soak.store.records import (
    FINDING_KEYS,
    HOST_DEVICE,
    STEP_TRACE_METRICS,
    EventRecord,
    ExportRows,
    FindingRecord,
    NodeRecord,
    RunRecord,
    node_of,
)
from soak.store.repo import BatchWriter, Store

__all__ = ["FINDING_KEYS", "HOST_DEVICE", "STEP_TRACE_METRICS", "BatchWriter", "EventRecord", "ExportRows", "FindingRecord", "NodeRecord",
           "RunRecord", "Store", "node_of"]
