"""The ``--listen`` address of ``/metrics``: its default and its one parser.

Kept apart from :mod:`exporters.server` so the CLI and the plan parser can check an address
without importing prometheus_client (``soak --help`` stays fast).

Default port 19400: outside 9100-9999, where the Prometheus default-port allocations are
exhausted (node_exporter 9100, dcgm-exporter 9400, Ascend npu-exporter 8082 sit elsewhere).
"""

from __future__ import annotations

import re

from soak.errors import InputError

DEFAULT_PORT = 19400
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"

_LISTEN = re.compile(r"(\[[0-9A-Za-z:.%]+\]|[A-Za-z0-9.\-]*):(\d{1,5})")


def parse_listen(text: str, name: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (all IPv4 interfaces) or ``[v6]:PORT`` -> (host, port).

    ``name`` is what the user typed the address as (``--listen``, ``exporter.listen``), for
    the one-line error.
    """
    m = _LISTEN.fullmatch(str(text))
    if not m:
        raise InputError(f"{name} must be HOST:PORT like {DEFAULT_LISTEN}, got {text!r}")
    port = int(m.group(2))
    if port > 65535:
        raise InputError(f"{name} {text!r}: port {port} is outside 0-65535")
    return m.group(1).strip("[]") or "0.0.0.0", port
