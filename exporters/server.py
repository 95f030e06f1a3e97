"""Serve ``/metrics`` from a private registry on a threading WSGI server.

Default port 19400: outside 9100-9999, where the Prometheus default-port allocations are
exhausted (node_exporter 9100, dcgm-exporter 9400, Ascend npu-exporter 8082 sit elsewhere).
A scrape only renders the cached snapshot, so it answers in milliseconds whatever npu-smi
is doing.
"""

from __future__ import annotations

import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.registry import CollectorRegistry

from soak.errors import InputError

DEFAULT_PORT = 19400
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass  # one line per scrape would flood a 72 h log


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (all interfaces) or ``[v6]:PORT`` -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        raise InputError(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:{DEFAULT_PORT}")
    host = host.strip("[]") or "0.0.0.0"
    try:
        number = int(port)
    except ValueError:
        raise InputError(f"--listen {text!r}: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise InputError(f"--listen {text!r}: port {number} is outside 0-65535")
    return host, number


class MetricsServer:
    """A running ``/metrics`` server. ``port`` is the bound port (useful with port 0)."""

    def __init__(self, registry: CollectorRegistry, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
        app = make_wsgi_app(registry)
        try:
            self.httpd = make_server(host, port, app, _ThreadingWSGIServer, handler_class=_QuietHandler)
        except OSError as exc:
            raise InputError(f"--listen {host}:{port}: cannot listen ({exc.strerror or exc})") from None
        self.host = host
        self.port = int(self.httpd.server_port)
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="soak-metrics", daemon=True)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(registry: CollectorRegistry, listen: str = DEFAULT_LISTEN) -> MetricsServer:
    """Start serving ``registry`` on ``listen`` (HOST:PORT) in a background thread."""
    host, port = parse_listen(listen)
    return MetricsServer(registry, host, port).start()
