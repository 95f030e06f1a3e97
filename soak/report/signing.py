"""Signing keys and the signed PDF.

``create_keys`` makes a private key (EC P-256 by default, or RSA 3072) and a self-signed X.509
certificate with ``cryptography``; the key file is written 0600 (encrypted with a passphrase if
one is given) in a folder soak makes 0700. A key is loaded only from a file its owner alone can
read, in a folder others cannot write; an encrypted key takes its passphrase from
``--key-passphrase-file`` or ``SOAK_KEY_PASSPHRASE``. ``finalize_pdf`` takes the
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
import tempfile
import warnings
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.utils import CryptographyDeprecationWarning

from soak.errors import InputError, KeyFileError
from soak.runfolder import PRIVATE_FILE_MODE, RUN_DIR_MODE, data_dir_keys, keys_dir, run_folder_of

# pyHanko imports cryptography's DSA key types to recognise them, and cryptography warns on that
# import that DSA is deprecated: a line on every signing and verification that says nothing
# about this report (soak signs with ECDSA or RSA keys and never makes a DSA one).
warnings.filterwarnings("ignore", message="DSA is deprecated", category=CryptographyDeprecationWarning)

KEY_FILE = "signing-key.pem"
CERT_FILE = "signing-cert.pem"
FIELD_NAME = "SoakAcceptanceSignature"
PASSPHRASE_ENV = "SOAK_KEY_PASSPHRASE"
"""An encrypted key's passphrase where no ``--key-passphrase-file`` is given (the app, a
systemd credential)."""
KEYS_DIR_MODE = RUN_DIR_MODE  # the key folder soak makes: its owner's alone
# The demo's certificate says what it is in its organizational unit: a report signed with it is
# a demonstration, whoever holds the file. Releases before this one made it unmarked, named so.
DEMO_UNIT = "soak demo key: not for acceptance"
DEMO_COMMON_NAME = "soak demo signer"


@dataclass(frozen=True)
class Signer:
    """Who a certificate names: its subject for people, its fingerprint, and whether it is the
    soak demo's key."""

    name: str
    fingerprint_sha256: str
    demo: bool
# the token `soak report serve` makes and prints in the app's address: an app session signs
# with the data dir's key only when its URL carries it (``?token=``), as Jupyter's token
# guards its server; in the environment, not argv (other users read argv with ps)
SIGN_TOKEN_ENV = "SOAK_REPORT_SIGN_TOKEN"


@dataclass(frozen=True)
class KeyPair:
    key_path: Path
    cert_path: Path
    passphrase: bytes | None = field(default=None, repr=False)  # an encrypted key's (None: PASSPHRASE_ENV)

    @property
    def fingerprint_sha256(self) -> str:
        return cert_fingerprint(self.cert_path)

    @property
    def signer(self) -> Signer:
        return signer_of(self.cert_path)


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


def signer_of(cert_path: Path) -> Signer:
    """The signer certificate ``cert_path`` names (PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    try:
        cert = x509.load_pem_x509_certificate(Path(cert_path).read_bytes())
    except (OSError, ValueError) as exc:
        raise KeyFileError(f"{cert_path}: not a PEM certificate ({exc})") from None
    return Signer(subject_words(cert.subject), cert.fingerprint(hashes.SHA256()).hex(":").upper(),
                  is_demo_subject(cert.subject))


def subject_words(subject: object) -> str:
    """A certificate subject as people read it: common name, organization, unit."""
    from cryptography.x509.oid import NameOID

    parts = [a.value for oid in (NameOID.COMMON_NAME, NameOID.ORGANIZATION_NAME, NameOID.ORGANIZATIONAL_UNIT_NAME)
             for a in subject.get_attributes_for_oid(oid)]  # type: ignore[attr-defined]
    return ", ".join(str(p) for p in parts) or subject.rfc4514_string()  # type: ignore[attr-defined]


def is_demo_subject(subject: object) -> bool:
    """Whether a certificate subject (cryptography's) is the soak demo's key."""
    from cryptography.x509.oid import NameOID

    units = [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)]  # type: ignore[attr-defined]
    names = [a.value for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)]  # type: ignore[attr-defined]
    return DEMO_UNIT in units or names == [DEMO_COMMON_NAME]


def create_keys(
    directory: Path,
    *,
    common_name: str = "soak acceptance signer",
    organization: str | None = None,
    algorithm: str = "ec",
    days: int = 3650,
    force: bool = False,
    passphrase: bytes | None = None,
    demo: bool = False,
) -> KeyPair:
    """Write ``signing-key.pem`` (0600; PKCS#8, encrypted with ``passphrase`` if given) and
    ``signing-cert.pem`` into ``directory`` (made 0700; one that others may write is refused:
    they could swap the key or the certificate); a ``demo`` key's certificate is marked as one
    (``DEMO_UNIT``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory = Path(directory)
    key_path, cert_path = directory / KEY_FILE, directory / CERT_FILE
    _not_in_a_run_folder(key_path)
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
    if demo:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, DEMO_UNIT))
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
        if not directory.is_dir():
            directory.mkdir(parents=True, mode=KEYS_DIR_MODE)
            directory.chmod(KEYS_DIR_MODE)  # whatever the umask
    except OSError as exc:
        raise InputError(f"--dir {directory}: cannot create the key folder ({exc.strerror or exc})") from None
    check_key_folder(directory)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption(),
    )
    # Create the key file 0600 from the start: no window where it is readable by others.
    if key_path.exists():
        key_path.unlink()
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return KeyPair(key_path, cert_path, passphrase)


def _not_in_a_run_folder(key_path: Path) -> None:
    run = run_folder_of(key_path.parent)
    if run is not None:
        raise KeyFileError(f"{key_path}: inside the run folder {run}, which travels with the run's data; "
                           "keep keys in their own folder (soak keys init's default) or elsewhere")


def check_key_folder(directory: Path) -> None:
    """Refuse a key folder that someone other than the signer may change (as ssh's StrictModes
    does): one owned by another user (its owner may rename the key away and put theirs in its
    place, whatever its mode), or one group or others may write (whoever may write there may put
    their own key or certificate in place of the signer's)."""
    if os.name != "posix":
        return
    st = Path(directory).stat()
    if st.st_uid != os.geteuid():
        raise KeyFileError(f"{directory}: the key folder is owned by uid {st.st_uid}, not by the signer "
                           f"(uid {os.geteuid()}), who may swap the key or certificate; make a folder of "
                           "your own with: soak keys init --dir DIR")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022 and not mode & stat.S_ISVTX:
        raise KeyFileError(f"{directory}: the key folder is writable by others (mode {mode:04o}); "
                           f"fix with: chmod 700 {directory}")


def check_key_file_owner(path: Path, *, root_may_own: bool = False) -> None:
    """Refuse a key (or certificate) file another user owns, or one group or others may write:
    they could replace what the signer signs with. A certificate root owns is no one else's."""
    if os.name != "posix":
        return
    st = Path(path).stat()
    if st.st_uid != os.geteuid() and not (root_may_own and st.st_uid == 0):
        raise KeyFileError(f"{path}: owned by uid {st.st_uid}, not by the signer (uid {os.geteuid()}); "
                           "make keys of your own with: soak keys init")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        raise KeyFileError(f"{path}: writable by others (mode {mode:04o}); fix with: chmod 600 {path}")


def read_passphrase(path: str | os.PathLike[str] | None, environ: Mapping[str, str] = os.environ) -> bytes | None:
    """An encrypted key's passphrase: the first line of ``path`` (``--key-passphrase-file``),
    else ``SOAK_KEY_PASSPHRASE``, else none. Never an argument: argv is every user's to read."""
    if path:
        from soak.tomlfile import read_regular_text

        text = read_regular_text(Path(path).expanduser(), "--key-passphrase-file", KeyFileError, 64 << 10)
        line = text.splitlines()[0] if text.strip() else ""
        if not line:
            raise KeyFileError(f"--key-passphrase-file {path}: the file is empty")
        return line.encode()
    value = environ.get(PASSPHRASE_ENV)
    return value.encode() if value else None


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
    check_key_file_owner(key_path)
    check_key_folder(key_path.parent)
    _not_in_a_run_folder(key_path)


def load_keypair(key: str | Path, cert: str | Path, passphrase: bytes | None = None) -> KeyPair:
    key_path, cert_path = Path(key).expanduser(), Path(cert).expanduser()
    check_key_permissions(key_path)
    if not cert_path.is_file():
        raise KeyFileError(f"{cert_path}: no such certificate file")
    check_key_file_owner(cert_path, root_may_own=True)
    return KeyPair(key_path, cert_path, passphrase)


def default_keypair(data_dir: Path, passphrase: bytes | None = None) -> KeyPair | None:
    """The key pair ``soak keys init`` writes by default (``soak.runfolder.keys_dir``), when it
    exists; else one an earlier release made beside ``data_dir``'s run folders."""
    for d in (keys_dir(), data_dir_keys(data_dir)):
        if (d / KEY_FILE).is_file() and (d / CERT_FILE).is_file():
            return load_keypair(d / KEY_FILE, d / CERT_FILE, passphrase)
    return None


def _passphrase_of(keys: KeyPair) -> bytes | None:
    """The passphrase that opens ``keys``' key (None for a key that is not encrypted), or one
    line naming what is missing or wrong."""
    from cryptography.hazmat.primitives import serialization

    given = keys.passphrase if keys.passphrase is not None else read_passphrase(None)
    data = keys.key_path.read_bytes()
    try:
        serialization.load_pem_private_key(data, password=given)
        return given
    except TypeError:
        if given is None:
            raise KeyFileError(f"{keys.key_path}: the key is encrypted: give its passphrase with "
                               f"--key-passphrase-file FILE or {PASSPHRASE_ENV}") from None
        return None  # a passphrase for a key that needs none (the variable is set host-wide)
    except ValueError:
        what = "wrong passphrase" if given is not None and b"ENCRYPTED" in data else "not a PEM private key"
        raise KeyFileError(f"{keys.key_path}: cannot load the key ({what})") from None


def _signer(keys: KeyPair):
    from pyhanko.sign import signers

    passphrase = _passphrase_of(keys)
    try:
        signer = signers.SimpleSigner.load(str(keys.key_path), str(keys.cert_path), key_passphrase=passphrase)
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
    stamp_font: tuple[Path, int] | None = None,
) -> bytes:
    """Embed ``attachments`` and (with ``keys``) sign. Returns the final PDF bytes.

    The visible signature's stamp says ``stamp_lines`` (pyhanko fills in ``%(signer)s``, the
    certificate's common name, and ``%(ts)s``, the signing time); by default "Signed by" and
    "Time" in English, ASCII only (pyhanko's own font). ``stamp_font`` (a font file and its face) draws them where the standard
    Latin font cannot: the Chinese report's stamp."""
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
    stamp_lines = stamp_lines or ("Signed by: %(signer)s", "Time: %(ts)s")
    text = "\n".join(stamp_lines)
    out = io.BytesIO()
    with tempfile.TemporaryDirectory(prefix="soak-stamp-") as tmp:
        style = stamp.TextStampStyle(stamp_text=text, border_width=1)
        if stamp_font is not None:
            from pyhanko.pdf_utils.font.opentype import GlyphAccumulatorFactory
            from pyhanko.pdf_utils.text import TextBoxStyle

            # every character the stamp can draw: its text, the signer's name, the time's digits
            chars = text + keys.signer.name + "".join(map(chr, range(0x20, 0x7F)))
            face = stamp_font_file(stamp_font[0], stamp_font[1], chars, Path(tmp) / "stamp.ttf")
            style = stamp.TextStampStyle(stamp_text=text, border_width=1,
                                         text_box_style=TextBoxStyle(font=GlyphAccumulatorFactory(str(face))))
        try:
            signers.PdfSigner(meta, signer=signer, timestamper=timestamper, stamp_style=style).sign_pdf(
                w, output=out
            )
        except OSError as exc:  # the TSA is unreachable or answered garbage
            raise InputError(f"--tsa-url {tsa_url}: timestamp request failed: {exc}") from exc
    return out.getvalue()


def stamp_font_file(path: Path, index: int, chars: str, out: Path) -> Path:
    """Face ``index`` of the font ``path`` cut to ``chars``, written to ``out``: pyhanko's
    OpenType engine reads a single-face file (a CJK font is often a collection, .ttc), and a
    5-20 MB face cut to the stamp's characters is read in a moment. Scaled to 1000 units per
    em: pyhanko writes HarfBuzz's advances, in font units, as PDF glyph space (thousandths of
    an em), and a TrueType font of 2048 units drew the stamp twice as wide."""
    from fontTools import subset
    from fontTools.ttLib import TTFont
    from fontTools.ttLib.scaleUpem import scale_upem

    font = TTFont(str(path), fontNumber=index)
    options = subset.Options()
    options.layout_features = ["*"]
    options.drop_tables += ["FFTM"]
    cut = subset.Subsetter(options)
    cut.populate(text=chars)
    cut.subset(font)
    if font["head"].unitsPerEm != 1000:
        scale_upem(font, 1000)
    font.save(str(out))
    return out


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()
