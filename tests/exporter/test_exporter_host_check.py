"""``/metrics`` without a password checks ``Host`` (was: any ``Host`` was answered, so a
DNS-rebinding page, its name pointed at 127.0.0.1, read the chips' serials and findings through
the browser of anyone on the node)."""

from __future__ import annotations

import http.client
import socket

import pytest
from prometheus_client import CollectorRegistry, Gauge

from exporters.server import serve
from exporters.webconfig import WebConfig


def _status(port: int, host: str | None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", "/metrics", skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Gauge("soak_test_value", "a value", registry=registry).set(7)
    return registry


def test_a_foreign_host_gets_403_and_the_names_prometheus_uses_get_200(registry: CollectorRegistry) -> None:
    server = serve(registry, "127.0.0.1:0", allowed_hosts=["metrics.example.org"])
    try:
        port = server.port
        for foreign in ("rebind.example", f"rebind.example:{port}", "127.0.0.1.nip.io", f"x.localhost.evil:{port}"):
            assert _status(port, foreign) == 403, foreign
        for name in (f"127.0.0.1:{port}", "127.0.0.1", f"[::1]:{port}", f"localhost:{port}", f"soak-exporter:{port}",
                     f"{socket.gethostname()}:{port}", f"metrics.example.org:{port}", f"10.0.3.7:{port}", None):
            assert _status(port, name) == 200, name
    finally:
        server.stop()


def test_with_basic_auth_the_password_is_the_guard(registry: CollectorRegistry) -> None:
    import base64

    import bcrypt

    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    server = serve(registry, "127.0.0.1:0", web_config=WebConfig("web.yml", basic_auth_users={"p": hashed}))
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", "/metrics", headers={"Host": "metrics.behind.a.proxy.example",
                                                 "Authorization": "Basic " + base64.b64encode(b"p:s3cret").decode()})
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        server.stop()
