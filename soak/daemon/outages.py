"""Reader outages: a reader or a chip that cannot be read, from the first failing snapshot
to the first good one, as one ``outage`` event and daemon log lines. A chip that cannot be
read is evidence missing, and the verdict says so (``soak.judge``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from soak.telemetry.records import Snapshot

log = logging.getLogger("soak.daemon")


@dataclass(frozen=True)
class Outage:
    """One reader's outage, closed (times on the run's time line)."""

    reader: str  # a reader's name, or "devices" for chips that gave no reading
    start: float
    end: float
    error: str
    devices: tuple[str, ...]

    @property
    def message(self) -> str:
        return f"{self.reader}: {self.error}" + (f" ({len(self.devices)} chips)" if self.devices else "")

    @property
    def detail(self) -> dict[str, Any]:
        return {"reader": self.reader, "error": self.error, "devices": list(self.devices)}


class ReaderOutages:
    """The outages open now; each snapshot opens and closes them."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[float, str, tuple[str, ...]]] = {}

    def track(self, snapshot: Snapshot) -> list[Outage]:
        """Follow one snapshot: the outages it ends."""
        down: dict[str, tuple[str, tuple[str, ...]]] = {}
        for st in snapshot.readers:
            if not st.ok:
                down[st.reader] = (st.error or "failed", ())
        failed = [d for d in snapshot.devices if not d.up]
        if failed:
            errors = sorted({d.error or "no reading" for d in failed})
            down["devices"] = ("; ".join(errors)[:500], tuple(d.device for d in failed))
        now = snapshot.ts
        for key, (error, devices) in down.items():
            if key not in self._open:
                self._open[key] = (now, error, devices)
                log.error("reader %s failing%s: %s", key, f" on {', '.join(devices)}" if devices else "", error)
        return [self._close(key, now) for key in [k for k in self._open if k not in down]]

    def close_all(self, end: float) -> list[Outage]:
        """The run ends: every outage still open ends with it."""
        return [self._close(key, end) for key in list(self._open)]

    def _close(self, key: str, end: float) -> Outage:
        start, error, devices = self._open.pop(key)
        log.warning("reader %s back after %.0f s (run time line)", key, end - start)
        return Outage(key, start, end, error, devices)
