"""A signed soak report that is the same bytes for the same seed, for fuzzing ``soak verify``.

Byte-level damage is only reproducible from a seed if the bytes it damages are too. A report
signed the ordinary way differs on every run: a fresh key, ECDSA's random nonce, the signing
time, the report's "generated" line and the file IDs. Here the key is an RSA key whose primes
come from the seed (PKCS#1 v1.5 signatures are deterministic), the certificate has fixed dates
and serial, and while ``soak report pdf`` runs the clock and the random bytes it reads are
pinned. The report itself is made by the product's own command, so it is what a user gets.
"""

from __future__ import annotations

import contextlib
import importlib
import random
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

from soak.report.signing import KeyPair
from soak.store import Store
from tests.report.synth import write_run

FIXED_TS = 1_790_003_600.0  # an hour after the synthetic run started: the report is made and signed then
# the pyHanko modules that read the clock while signing; imported first so that each one's
# ``datetime`` can be pinned
_PYHANKO_CLOCKS = ("pyhanko.sign.signers.pdf_cms", "pyhanko.sign.signers.pdf_signer",
                   "pyhanko.sign.signers.functions", "pyhanko.stamp.text",
                   "pyhanko.pdf_utils.metadata.info", "pyhanko.pdf_utils.metadata.xmp_xml")
_SMALL_PRIMES = [p for p in range(3, 2000) if all(p % d for d in range(2, int(p ** 0.5) + 1))]


def _is_prime(n: int, rng: random.Random) -> bool:
    if any(n % p == 0 for p in _SMALL_PRIMES):
        return False
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for _ in range(40):  # Miller-Rabin: a composite survives with probability < 4^-40
        x = pow(rng.randrange(2, n - 2), d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


def _prime(rng: random.Random, bits: int) -> int:
    while True:
        n = rng.getrandbits(bits) | (3 << (bits - 2)) | 1  # top two bits set: p*q has 2*bits bits
        if _is_prime(n, rng):
            return n


def seeded_keys(seed: int, directory: Path) -> KeyPair:
    """An RSA-2048 key (0600) and a self-signed certificate, both derived from ``seed``, with
    the key usages ``soak keys init`` gives its certificates."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    rng = random.Random(seed)
    e = 65537
    while True:
        p, q = _prime(rng, 1024), _prime(rng, 1024)
        phi = (p - 1) * (q - 1)
        if p != q and phi % e:
            break
    d = pow(e, -1, phi)
    key = rsa.RSAPrivateNumbers(p, q, d, rsa.rsa_crt_dmp1(d, p), rsa.rsa_crt_dmq1(d, q),
                                rsa.rsa_crt_iqmp(p, q), rsa.RSAPublicNumbers(e, p * q)).private_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Fuzz Signer")])
    start = datetime.fromtimestamp(FIXED_TS, UTC) - timedelta(days=30)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(rng.getrandbits(63) + 1)
        .not_valid_before(start).not_valid_after(start + timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=True, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    keys = KeyPair(directory / "key.pem", directory / "cert.pem")
    keys.key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
    keys.key_path.chmod(0o600)
    keys.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return keys


class _PinnedDatetime(datetime):
    @classmethod
    def now(cls, tz=None):  # type: ignore[override]
        return datetime.fromtimestamp(FIXED_TS, tz)


@contextlib.contextmanager
def pinned_clock_and_randomness(seed: int) -> Iterator[None]:
    """The wall clock reads FIXED_TS and ``os.urandom`` (the PDF's /ID, pyHanko's uuid4 names)
    gives bytes from ``seed``; ReportLab writes its invariant dates and IDs."""
    from reportlab import rl_config

    for name in _PYHANKO_CLOCKS:
        importlib.import_module(name)
    rng = random.Random(seed)
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch("time.time", lambda: FIXED_TS))
        stack.enter_context(mock.patch("os.urandom", rng.randbytes))
        stack.enter_context(mock.patch.object(rl_config, "invariant", 1))
        for name, module in list(sys.modules.items()):
            if name.startswith("pyhanko") and getattr(module, "datetime", None) is datetime:
                stack.enter_context(mock.patch.object(module, "datetime", _PinnedDatetime))
        yield


def signed_report(seed: int, root: Path) -> tuple[bytes, KeyPair]:
    """A one-chip run's report, signed with ``seeded_keys(seed)``: the PDF's bytes and the keys."""
    from tests.fuzz.fuzz_helpers import run_cli

    keys = seeded_keys(seed, root / "keys")
    run_dir = root / "runs" / "fz"
    run_dir.mkdir(parents=True)
    with Store.open(run_dir / "soak.db") as store:
        write_run(store, "fz", chips=1, hours=0.2, interval_s=30.0, findings=False)
        store.update_run("fz", run_dir=str(run_dir))
    pdf = root / "signed.pdf"
    with pinned_clock_and_randomness(seed):
        out = run_cli(["report", "pdf", "fz", "--data-dir", str(root / "runs"), "-o", str(pdf), "--key",
                       str(keys.key_path), "--cert", str(keys.cert_path)], f"signing the fuzz report (seed {seed})")
    assert out.rc == 0, out.err
    return pdf.read_bytes(), keys
