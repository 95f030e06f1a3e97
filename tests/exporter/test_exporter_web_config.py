"""``--web-config``: /metrics over TLS with basic auth, node_exporter's web config format
(was: plain HTTP only, no auth)."""

from __future__ import annotations

import base64
import ipaddress
import socket
import ssl
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from exporter_helpers import free_port, soak_exporter_argv
from prometheus_client import CollectorRegistry, Gauge

from exporters.server import serve
from exporters.webconfig import load_web_config
from soak.errors import InputError
from tests import procs


def _server_cert(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    crt, pem = folder / "server.crt", folder / "server.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    return crt, pem


@pytest.fixture
def web_config(tmp_path: Path) -> Path:
    import bcrypt

    _server_cert(tmp_path)
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$", 1)
    path = tmp_path / "web.yml"
    # relative paths are to the file's folder, as exporter-toolkit reads them
    path.write_text(f"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                    f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    return path


def _get(url: str, cafile: Path, user: str | None = None, password: str = "") -> tuple[int, str]:
    req = urllib.request.Request(url)
    if user is not None:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    ctx = ssl.create_default_context(cafile=str(cafile))
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("WWW-Authenticate", "")


def test_metrics_over_tls_with_basic_auth(web_config: Path) -> None:
    registry = CollectorRegistry()
    Gauge("soak_test_value", "a value", registry=registry).set(7)
    server = serve(registry, "127.0.0.1:0", web_config=load_web_config(web_config))
    crt = web_config.parent / "server.crt"
    try:
        assert server.url == f"https://127.0.0.1:{server.port}/metrics"
        # a client that connects and never starts TLS holds its own thread, not the server
        stalled = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        status, body = _get(server.url, crt, "prometheus", "s3cret")
        assert status == 200 and "soak_test_value 7.0" in body
        assert _get(server.url, crt) == (401, 'Basic realm="soak"')
        assert _get(server.url, crt, "prometheus", "wrong")[0] == 401
        assert _get(server.url, crt, "nobody", "s3cret")[0] == 401
        with pytest.raises(OSError):  # plain HTTP gets no metrics
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5).read()
        stalled.close()
    finally:
        server.stop()


@pytest.mark.parametrize("text, words", [
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  clent_ca_file: ca.crt\n",
     "unknown key tls_server_config.clent_ca_file"),
    ("basic_auth: {}\n", "unknown key basic_auth"),
    ("tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n",
     "tls_server_config.cert_file {dir}/missing.crt: no such file"),
    ("tls_server_config:\n  cert_file: server.crt\n", "needs both cert_file and key_file"),
    ("basic_auth_users:\n  prometheus: s3cret\n", "basic_auth_users.prometheus is not a bcrypt hash"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
     "  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
])
def test_a_bad_web_config_is_one_line_naming_the_key(tmp_path: Path, text: str, words: str) -> None:
    _server_cert(tmp_path)
    path = tmp_path / "web.yml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_web_config(path)
    message = str(err.value)
    assert message.startswith(f"--web-config {path}: ") and words.format(dir=tmp_path) in message
    assert "\n" not in message


@pytest.mark.slow
def test_soak_exporter_serves_with_its_web_config(web_config: Path, spawn) -> None:
    port = free_port()
    proc = spawn(soak_exporter_argv(port, "--backend", "cpu", "--interval", "1", "--web-config", str(web_config)))
    url = f"https://127.0.0.1:{port}/metrics"
    crt = web_config.parent / "server.crt"

    def scraped() -> str:
        status, body = _get(url, crt, "prometheus", "s3cret")
        return body if status == 200 and "soak_device_up{" in body else ""

    procs.wait_until(scraped, proc, 30, retry_on=(OSError,), interval_s=0.3)
    assert _get(url, crt)[0] == 401
    bad = spawn(soak_exporter_argv(free_port(), "--backend", "cpu", "--web-config", str(web_config.parent / "no.yml")))
    assert bad.wait(30) == 2
    assert bad.stderr_text().strip() == f"soak: error: --web-config {web_config.parent / 'no.yml'}: no such file"


def test_the_plans_web_config_is_checked_when_the_plan_is_read(tmp_path: Path, web_config: Path) -> None:
    from soak.config import plan_from_dict
    from soak.errors import ConfigError

    plan = plan_from_dict({"exporter": {"web_config": str(web_config)}})
    assert plan.exporter.web_config == str(web_config)
    with pytest.raises(ConfigError) as err:
        plan_from_dict({"exporter": {"web_config": str(tmp_path / "none.yml")}})
    assert str(err.value) == f"exporter.web_config {tmp_path / 'none.yml'}: no such file"
