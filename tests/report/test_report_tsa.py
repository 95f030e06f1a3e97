"""``--tsa-url``: an RFC 3161 timestamp from a TSA on loopback ends up in the signature."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from soak.report.build import build_pdf
from soak.report.verify import verify_pdf
from soak.store import Store

# slow: signs real PDFs against a TSA served on loopback
pytestmark = pytest.mark.slow


def _tsa_identity(name: str = "Loopback Test TSA", valid_from: datetime | None = None):
    from asn1crypto import keys as akeys
    from asn1crypto import x509 as ax509
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = valid_from or datetime.now(UTC)
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


@contextmanager
def _tsa(name: str = "Loopback Test TSA", fixed_dt: datetime | None = None):
    """(URL, the request sizes seen, its certificate) of a TSA served on loopback."""
    from asn1crypto import tsp
    from pyhanko.sign.timestamps.dummy_client import DummyTimeStamper

    cert, key = _tsa_identity(name, None if fixed_dt is None else fixed_dt - timedelta(days=1))
    stamper = DummyTimeStamper(tsa_cert=cert, tsa_key=key, fixed_dt=fixed_dt)
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
        yield f"http://127.0.0.1:{server.server_address[1]}/tsa", seen, cert
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def tsa_url():
    with _tsa() as (url, seen, _cert):
        yield url, seen


def _pem(cert, path: Path) -> Path:
    from asn1crypto import pem

    path.write_bytes(pem.armor("CERTIFICATE", cert.dump()))
    return path


def test_a_timestamp_from_a_tsa_of_ones_own_is_untrusted_and_never_the_signing_time(recorded, keys, tmp_path,
                                                                                        capsys):
    # the token is outside the signed bytes: anyone can have a TSA of their own vouch for 2019-06-01
    from soak.cli import main

    with _tsa() as (_url, _seen, real_cert), _tsa("Self-made TSA", datetime(2019, 6, 1, tzinfo=UTC)) as (url, _s, _c):
        out = tmp_path / "forged.pdf"
        with Store.open(recorded["db"], create=False) as store:
            build_pdf(store, recorded["run_id"], out, keys=keys, tsa_url=url)
        real = _pem(real_cert, tmp_path / "tsa.pem")

    res = verify_pdf(out, keys.cert_path)
    assert res.timestamped and res.timestamp_time.startswith("2019-06-01")
    assert res.timestamp_trusted is False and res.timestamp_tsa == "Common Name: Self-made TSA"
    assert not res.signing_time.startswith("2019")
    assert main(["verify", str(out), "--cert", str(keys.cert_path)]) == 0
    lines = dict(line.split(":", 1) for line in capsys.readouterr().out.splitlines() if ":" in line)
    assert lines["timestamp"].strip().startswith("UNTRUSTED, not the signing time: 2019-06-01")
    assert "no --tsa-cert given" in lines["timestamp"]
    assert "2019" not in lines["signing time"]
    # with the TSA the user trusts, the self-made one fails the check
    res = verify_pdf(out, keys.cert_path, tsa_cert=[real])
    assert not res.ok and res.failures == ["untrusted-timestamp"] and res.timestamp_trusted is False
    assert main(["verify", str(out), "--cert", str(keys.cert_path), "--tsa-cert", str(real)]) == 1
    out_text = capsys.readouterr().out
    assert "result:         FAILED" in out_text and "untrusted timestamp: its TSA Common Name: Self-made TSA" in out_text


def test_a_timestamp_from_a_trusted_tsa_is_printed_as_trusted(recorded, keys, tmp_path, capsys):
    from soak.cli import main

    with _tsa() as (url, _seen, cert):
        out = tmp_path / "bt.pdf"
        with Store.open(recorded["db"], create=False) as store:
            build_pdf(store, recorded["run_id"], out, keys=keys, tsa_url=url)
    tsa = _pem(cert, tmp_path / "tsa.pem")
    res = verify_pdf(out, keys.cert_path, tsa_cert=[tsa])
    assert res.ok, res.problems
    assert res.timestamp_trusted is True
    assert main(["verify", str(out), "--cert", str(keys.cert_path), "--tsa-cert", str(tsa)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("timestamp:"))
    assert line.endswith("(trusted: TSA Common Name: Loopback Test TSA)")


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


def test_a_timestamp_token_changed_inside_contents_is_invalid(recorded, keys, tsa_url, tmp_path):
    # the token is not signed by the signer: a changed byte in it leaves the signature intact
    import re

    from asn1crypto import cms

    url, _seen = tsa_url
    out = tmp_path / "bt.pdf"
    with Store.open(recorded["db"], create=False) as store:
        build_pdf(store, recorded["run_id"], out, keys=keys, tsa_url=url)
    data = bytearray(out.read_bytes())
    m = list(re.finditer(rb"/ByteRange\s*\[\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\]", bytes(data)))[-1]
    a, b, c, _ = map(int, m.groups())
    digits = bytes(data[a + b + 1:c - 1])
    raw = bytes.fromhex(digits.decode())
    signer_info = cms.ContentInfo.load(raw, strict=False)["content"]["signer_infos"][0]
    token = next(attr for attr in signer_info["unsigned_attrs"]
                 if attr["type"].native == "signature_time_stamp_token")["values"][0]
    tst_signature = token["content"]["signer_infos"][0]["signature"].native
    at = raw.index(tst_signature) + 5
    changed = raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1:]
    hexed = changed.hex().upper() if digits == digits.upper() else changed.hex()  # the file's own case
    data[a + b + 1:c - 1] = hexed.encode()
    (tmp_path / "ts.pdf").write_bytes(bytes(data))

    res = verify_pdf(tmp_path / "ts.pdf", keys.cert_path)
    assert res.intact and res.valid  # the signer's signature does not cover the token
    assert res.failures == ["timestamp-invalid"], res.problems
    assert res.timestamp_trusted is False
