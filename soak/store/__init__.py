"""The soak store: SQLAlchemy Core tables (``schema``) and the repository API (``Store``).

``Store`` (``repo``) is made of one part per job: the engine and its one retry and error path
(``engine``), runs and their log (``runs``), sample series (``samples``), traces and exports
(``trace``), cluster runs (``cluster``); reads hand back the frozen records of ``records``, and
``writer`` buffers the sampler's ticks.
"""

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
)
from soak.store.repo import Store
from soak.store.writer import BatchWriter

__all__ = ["FINDING_KEYS", "HOST_DEVICE", "STEP_TRACE_METRICS", "BatchWriter", "EventRecord", "ExportRows", "FindingRecord", "NodeRecord",
           "RunRecord", "Store"]
