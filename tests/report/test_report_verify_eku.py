"""``soak verify --cert CA``: a certificate the CA issued signs reports only when it is for
signing documents (was: any it issued with nonRepudiation, a TLS server's included)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from soak.report.build import build_pdf
from soak.report.signing import KeyPair
from soak.report.verify import verify_pdf
from soak.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.compute]  # signs real PDFs

DOCUMENT_SIGNING = "1.3.6.1.5.5.7.3.36"  # id-kp-documentSigning, RFC 9336


def _ca(folder: Path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Vendor CA")])
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    path = folder / "ca.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert, path


def _issued(folder: Path, ca_key, ca_cert, name: str, eku: list[str]) -> KeyPair:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID, ObjectIdentifier

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=30))
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=True, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ObjectIdentifier(o) for o in eku]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    key_path, cert_path = folder / f"{name}-key.pem", folder / f"{name}-cert.pem"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return KeyPair(key_path, cert_path)


def test_a_tls_server_certificate_of_the_ca_is_not_a_trusted_signer(recorded, tmp_path):
    ca_key, ca_cert, ca_path = _ca(tmp_path)
    server = _issued(tmp_path, ca_key, ca_cert, "www", ["1.3.6.1.5.5.7.3.1"])  # serverAuth
    signer = _issued(tmp_path, ca_key, ca_cert, "signer", [DOCUMENT_SIGNING])
    with Store.open(recorded["db"], create=False) as store:
        build_pdf(store, recorded["run_id"], tmp_path / "www.pdf", keys=server)
        build_pdf(store, recorded["run_id"], tmp_path / "signer.pdf", keys=signer)

    res = verify_pdf(tmp_path / "www.pdf", ca_path)
    assert res.intact and res.valid and res.trusted is False
    assert res.failures == ["untrusted-signer"]
    assert res.problems == [f"untrusted signer: Common Name: www (SHA-256 {res.signer_fingerprint_sha256}) is issued "
                            "by a --cert certificate but not for signing documents (extended key usage: server_auth)"]
    res = verify_pdf(tmp_path / "signer.pdf", ca_path)
    assert res.ok and res.trusted, res.problems
