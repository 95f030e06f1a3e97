"""``--tsa-url``: an RFC 3161 timestamp from a TSA on loopback ends up in the signature."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from soak.report.build import build_pdf
from soak.report.verify import verify_pdf
from soak.store import Store

# slow: signs real PDFs against a TSA served on loopback
pytestmark = pytest.mark.slow


def _tsa_identity():
    from asn1crypto import keys as akeys
    from asn1crypto import x509 as ax509
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Loopback Test TSA")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True)
        .sign(key, hashes.SHA256())
    )
    der_key = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return ax509.Certificate.load(cert.public_bytes(serialization.Encoding.DER)), akeys.PrivateKeyInfo.load(der_key)


@pytest.fixture
def tsa_url():
    from asn1crypto import tsp
    from pyhanko.sign.timestamps.dummy_client import DummyTimeStamper

    cert, key = _tsa_identity()
    stamper = DummyTimeStamper(tsa_cert=cert, tsa_key=key)
    seen: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            resp = stamper.request_tsa_response(tsp.TimeStampReq.load(body)).dump()
            seen.append(len(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(resp)))
            self.end_headers()
            self.wfile.write(resp)

        def log_message(self, *args) -> None:  # keep test output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/tsa", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_pdf_signed_with_a_tsa_timestamp(recorded, keys, tsa_url, tmp_path):
    url, seen = tsa_url
    out = tmp_path / "bt.pdf"
    with Store.open(recorded["db"], create=False) as store:
        build_pdf(store, recorded["run_id"], out, keys=keys, tsa_url=url)
    assert seen, "the TSA was never asked"
    res = verify_pdf(out, keys.cert_path)
    assert res.intact and res.valid
    assert res.timestamped and res.timestamp_time
    assert res.ok, res.problems


def test_unreachable_tsa_is_one_clear_error(recorded, keys, tmp_path):
    from soak.errors import InputError

    with Store.open(recorded["db"], create=False) as store, pytest.raises(InputError, match="--tsa-url"):
        build_pdf(store, recorded["run_id"], tmp_path / "x.pdf", keys=keys, tsa_url="http://127.0.0.1:9/tsa")
    assert not (tmp_path / "x.pdf").exists()
