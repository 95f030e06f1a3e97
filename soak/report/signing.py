"""Signing keys and the signed PDF.

``create_keys`` makes a private key (EC P-256 by default, or RSA 3072) and a self-signed X.509
certificate with ``cryptography``; the key file is written 0600. ``finalize_pdf`` takes the
rendered report, embeds the raw data (CSV) and the findings (JSON) as file attachments, and
adds a visible PAdES signature (pyHanko) on the slot the layout reserved, with an RFC 3161
timestamp when a TSA URL is given. The signature is the last incremental update, so its byte
range covers the whole file, attachments included, but for ``/Contents`` itself: a changed byte
in the range breaks the digest; in ``/Contents``, the signed attributes and the signature value
break the signature, the padding after its DER must be zeros in one case of hex digits
(``verify.contents_exact``), and the CMS's unsigned parts (the certificates it carries, the
timestamp token) are not signed: the token is checked on its own against the TSA anchors.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from soak.errors import InputError, KeyFileError
from soak.runfolder import keys_dir

KEY_FILE = "signing-key.pem"
CERT_FILE = "signing-cert.pem"
FIELD_NAME = "SoakAcceptanceSignature"
# the token `soak report serve` makes and prints in the app's address: an app session signs
# with the data dir's key only when its URL carries it (``?token=``), as Jupyter's token
# guards its server; in the environment, not argv (other users read argv with ps)
SIGN_TOKEN_ENV = "SOAK_REPORT_SIGN_TOKEN"


@dataclass(frozen=True)
class KeyPair:
    key_path: Path
    cert_path: Path

    @property
    def fingerprint_sha256(self) -> str:
        return cert_fingerprint(self.cert_path)


@dataclass(frozen=True)
class Attachment:
    name: str
    data: bytes
    mime_type: str
    description: str


def attachment_limit_bytes() -> int:
    """The most one attachment may hold: pyHanko's limit on the decoded size of one stream of
    an untrusted PDF (256 MiB in pyHanko 0.38), which ``soak verify`` applies when it reads the
    raw data back. A report with a larger one could be signed but never verified."""
    from pyhanko.pdf_utils.decode_limits import StreamDecodeLimits

    return int(StreamDecodeLimits().max_output_size or 0) or (1 << 62)


def check_attachment(name: str, size_bytes: int, run_id: str | None = None) -> None:
    """``InputError`` (one line) when an attachment is over ``attachment_limit_bytes``."""
    limit = attachment_limit_bytes()
    if size_bytes > limit:
        mib = 1024 * 1024
        of = f"run {run_id}: " if run_id else ""
        raise InputError(f"{of}{name} is {size_bytes / mib:.0f} MiB, over the {limit / mib:.0f} MiB one PDF attachment "
                         "may decode to (pyHanko's limit for untrusted PDFs, which soak verify applies): no PDF is "
                         "written; the raw data stays in the run's store")


def cert_fingerprint(cert_path: Path) -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    cert = x509.load_pem_x509_certificate(Path(cert_path).read_bytes())
    return cert.fingerprint(hashes.SHA256()).hex(":").upper()


def create_keys(
    directory: Path,
    *,
    common_name: str = "soak acceptance signer",
    organization: str | None = None,
    algorithm: str = "ec",
    days: int = 3650,
    force: bool = False,
) -> KeyPair:
    """Write ``signing-key.pem`` (0600) and ``signing-cert.pem`` into ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory = Path(directory)
    key_path, cert_path = directory / KEY_FILE, directory / CERT_FILE
    if not force and (key_path.exists() or cert_path.exists()):
        raise KeyFileError(f"{key_path}: a signing key already exists here (use --force to replace it)")
    if algorithm == "ec":
        key = ec.generate_private_key(ec.SECP256R1())
    elif algorithm == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=3072)
    else:
        raise KeyFileError(f"--algorithm {algorithm}: must be ec or rsa")
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    name = x509.Name(attrs)
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=True,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        # id-kp-documentSigning (RFC 9336) first: what a verifier asks of a document signer
        .add_extension(x509.ExtendedKeyUsage([x509.ObjectIdentifier("1.3.6.1.5.5.7.3.36"),
                                              ExtendedKeyUsageOID.EMAIL_PROTECTION]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--dir {directory}: cannot create the key folder ({exc.strerror or exc})") from None
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # Create the key file 0600 from the start: no window where it is readable by others.
    if key_path.exists():
        key_path.unlink()
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return KeyPair(key_path, cert_path)


def check_key_permissions(key_path: Path) -> None:
    """Refuse a private key that group or others can read, as ssh does."""
    key_path = Path(key_path)
    if not key_path.is_file():
        raise KeyFileError(f"{key_path}: no such key file (create one with: soak keys init)")
    if os.name != "posix":
        return
    mode = stat.S_IMODE(key_path.stat().st_mode)
    if mode & 0o077:
        raise KeyFileError(
            f"{key_path}: private key is readable by others (mode {mode:04o}); fix with: chmod 600 {key_path}"
        )


def load_keypair(key: str | Path, cert: str | Path) -> KeyPair:
    key_path, cert_path = Path(key).expanduser(), Path(cert).expanduser()
    check_key_permissions(key_path)
    if not cert_path.is_file():
        raise KeyFileError(f"{cert_path}: no such certificate file")
    return KeyPair(key_path, cert_path)


def default_keypair(data_dir: Path) -> KeyPair | None:
    """The key pair ``soak keys init`` writes by default, when it exists."""
    d = keys_dir(data_dir)
    if (d / KEY_FILE).is_file() and (d / CERT_FILE).is_file():
        return load_keypair(d / KEY_FILE, d / CERT_FILE)
    return None


def _signer(keys: KeyPair):
    from pyhanko.sign import signers

    try:
        signer = signers.SimpleSigner.load(str(keys.key_path), str(keys.cert_path))
    except (ValueError, OSError) as exc:
        raise KeyFileError(f"{keys.key_path}: cannot load the key or certificate: {exc}") from exc
    if signer is None:
        raise KeyFileError(f"{keys.key_path}: cannot load the key/certificate pair")
    return signer


def finalize_pdf(
    pdf: bytes,
    *,
    attachments: list[Attachment] = (),  # type: ignore[assignment]
    keys: KeyPair | None = None,
    slot_page: int = 0,
    slot_box: tuple[float, float, float, float] | None = None,
    tsa_url: str | None = None,
    reason: str = "Soak test acceptance report",
    location: str | None = None,
    stamp_lines: tuple[str, ...] = (),
) -> bytes:
    """Embed ``attachments`` and (with ``keys``) sign. Returns the final PDF bytes."""
    from pyhanko.pdf_utils import embed, generic
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter

    for att in attachments:
        check_attachment(att.name, len(att.data))
    w = IncrementalPdfFileWriter(io.BytesIO(pdf))
    for att in attachments:
        # Deflate at level 1 ourselves: on a 72 h run's 90 MB CSV the default level takes ~6 s
        # for a file only a quarter smaller.
        ef = embed.EmbeddedFileObject(
            w,
            dict_data={generic.pdf_name("/Filter"): generic.pdf_name("/FlateDecode")},
            encoded_data=zlib.compress(att.data, 1),
            mime_type=att.mime_type,
            params=embed.EmbeddedFileParams(embed_size=True, embed_checksum=True),
        )
        embed.embed_file(w, embed.FileSpec(att.name, file_name=att.name, embedded_data=ef, description=att.description))
    if keys is None:
        out = io.BytesIO()
        w.write(out)
        return out.getvalue()

    from pyhanko import stamp
    from pyhanko.sign import fields, signers
    from pyhanko.sign.fields import SigSeedSubFilter

    signer = _signer(keys)
    timestamper = None
    if tsa_url:
        from pyhanko.sign.timestamps.requests_client import RequestsHTTPTimeStamper

        timestamper = RequestsHTTPTimeStamper(tsa_url, timeout=20)
    box = tuple(int(round(v)) for v in slot_box) if slot_box else (330, 50, 560, 130)
    fields.append_signature_field(
        w, sig_field_spec=fields.SigFieldSpec(FIELD_NAME, on_page=slot_page, box=box)
    )
    meta = signers.PdfSignatureMetadata(
        field_name=FIELD_NAME,
        subfilter=SigSeedSubFilter.PADES,
        md_algorithm="sha256",
        reason=reason,
        location=location,
    )
    text = "\n".join(("Signed by: %(signer)s", "Time: %(ts)s", *stamp_lines))
    style = stamp.TextStampStyle(stamp_text=text, border_width=1)
    out = io.BytesIO()
    try:
        signers.PdfSigner(meta, signer=signer, timestamper=timestamper, stamp_style=style).sign_pdf(
            w, output=out
        )
    except OSError as exc:  # the TSA is unreachable or answered garbage
        raise InputError(f"--tsa-url {tsa_url}: timestamp request failed: {exc}") from exc
    return out.getvalue()


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()
