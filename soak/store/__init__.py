"""The soak store: SQLAlchemy Core tables (``schema``) and the repository API (``repo``)."""

from __future__ import annotations

from soak.store.repo import HOST_DEVICE, BatchWriter, EventRecord, FindingRecord, RunRecord, Store

__all__ = ["HOST_DEVICE", "BatchWriter", "EventRecord", "FindingRecord", "RunRecord", "Store"]
