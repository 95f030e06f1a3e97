"""telemetry: reading every chip and the host, one snapshot per tick.

``BACKENDS`` lives here, not in ``soak.telemetry.backends``, so the plan's checker
(``soak.config``) and the CLI can name the choices without importing every reader.
"""

from __future__ import annotations

BACKENDS = ("auto", "npu", "cuda", "cpu", "sim")
"""The telemetry backends a plan (``devices.backend``) or ``--backend`` may name."""
