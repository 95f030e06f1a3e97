"""Check a signed soak report: ``soak verify FILE --cert CERT``.

Two questions, answered separately. **Integrity**: the signature can be read, is
cryptographically valid, the signed bytes are unchanged and cover the entire file (nothing
appended after signing), and the raw-data digest printed in the report matches the attached
CSV. **Trust**: the signer is one of the certificates the customer was given (``--cert``, one or
more PEM/DER files, a PEM file may hold several) or is issued by one. A signature anyone can
make with a key of their own is worth nothing without the second answer, so a report passes
only with both, unless the caller asks for integrity alone in so many words
(``integrity_only=True``); then the result says the signer was not checked.

No certificate is picked up by default (not even the data folder's own): the anchor must be
what the vendor published, chosen by the person verifying, never something that travels with
the report or sits next to the signing key.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soak.errors import InputError
from soak.report.signing import attachment_limit_bytes

if TYPE_CHECKING:
    from pyhanko.pdf_utils.reader import PdfFileReader
    from pyhanko.sign.validation.pdf_embedded import EmbeddedPdfSignature

# A soak report is megabytes (its raw CSV attached); a PDF beyond this is not one.
MAX_PDF_BYTES = 2 << 30

RAW_NAME = "soak-raw.csv"
FINDINGS_NAME = "soak-findings.json"
CHIPS_NAME = "soak-chips.csv"  # a cluster report's per-chip table (soak.report.cluster)
PROFILE_NAME = "soak-profile.toml"  # the acceptance profile the run was judged by (soak analyze --profile)
_DIGEST_RE = re.compile(r"soak-data-sha256:([0-9a-f]{64}|N/A)")
_RUN_RE = re.compile(r"soak-run-id:(\S+)")

# Why a report failed: a stable code for machines (``failures`` in --format json) and the one
# sentence people read (``problems``). Each names one thing: the file, the signature, the
# content, or the signer.
UNREADABLE_PDF = "unreadable-pdf"
UNSIGNED = "unsigned"
SIGNATURE_UNREADABLE = "signature-unreadable"
SIGNATURE_INVALID = "signature-invalid"
TAMPERED = "tampered"
APPENDED = "appended"
UNTRUSTED_SIGNER = "untrusted-signer"
NO_TRUST_ANCHOR = "no-trust-anchor"
DATA_MISMATCH = "data-mismatch"
ATTACHMENTS_UNREADABLE = "attachments-unreadable"
FINDINGS_UNREADABLE = "findings-unreadable"
SEVERAL_SIGNATURES = "several-signatures"
TIMESTAMP_INVALID = "timestamp-invalid"
UNTRUSTED_TIMESTAMP = "untrusted-timestamp"


@dataclass
class VerifyResult:
    file: str
    signed: bool = False
    intact: bool | None = None  # None: the signature could not be read, so nothing was compared
    valid: bool | None = None
    coverage_entire_file: bool | None = None
    # True: the signer is a --cert certificate or issued by one. False: it is not, or no --cert
    # was given. None: not checked (integrity only, or no valid signature to attribute).
    trusted: bool | None = None
    integrity_only: bool = False
    trust_anchors: list[str] = field(default_factory=list)  # SHA-256 fingerprints of --cert
    signer: str | None = None
    signer_fingerprint_sha256: str | None = None
    signer_demo_key: bool | None = None  # the soak demo's key: a demonstration, not an acceptance
    signing_time: str | None = None
    timestamped: bool = False
    # The token is an unsigned attribute, outside what the signer signed: anyone can swap in
    # one from a TSA of their own. Its time says when the PDF was signed only when its TSA is
    # a --tsa-cert certificate or issued by one (True); False: it is not, or no --tsa-cert.
    timestamp_time: str | None = None
    timestamp_trusted: bool | None = None
    timestamp_tsa: str | None = None
    tsa_anchors: list[str] = field(default_factory=list)  # SHA-256 fingerprints of --tsa-cert
    run_id: str | None = None
    verdict: str | None = None
    data_sha256: str | None = None  # as printed in the report's metadata
    data_sha256_attached: str | None = None  # recomputed from the attached CSV
    attachments: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # codes, one per problem
    problems: list[str] = field(default_factory=list)
    detail: str | None = None  # the PDF/CMS parser's own message when the file or signature is damaged

    @property
    def ok(self) -> bool:
        return not self.problems

    def fail(self, code: str, message: str) -> None:
        self.failures.append(code)
        self.problems.append(message)

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["ok"] = self.ok
        return d


def load_trust_anchors(certs: Iterable[str | Path], option: str = "--cert") -> list:
    """The certificates in each ``--cert`` (or ``option``) file (PEM, several allowed, or one DER)."""
    from pyhanko.keys import load_certs_from_pemder_data

    anchors = []
    for cert in certs:
        cert_path = Path(cert)
        if cert_path.is_dir():
            raise InputError(f"{option} {cert}: is a directory, expected a certificate file")
        if not cert_path.is_file():
            raise InputError(f"{option} {cert}: no such file")
        from soak.tomlfile import read_regular_file

        raw = read_regular_file(cert_path, option, InputError)  # a device or FIFO: one line
        try:
            found = list(load_certs_from_pemder_data(raw))
            for c in found:
                c.sha256  # noqa: B018 - parse now: asn1crypto parses lazily
        except (ValueError, TypeError, OSError) as exc:
            raise InputError(f"{option} {cert}: not a PEM/DER certificate ({exc})") from None
        if not found:
            raise InputError(f"{option} {cert}: no certificate in it (expected PEM or DER)")
        anchors.extend(found)
    return anchors


# Extended key usages that make a certificate a CA issued a document signer (what Adobe Reader
# accepts, and RFC 9336's): a CA's TLS-server certificate carries nonRepudiation as well
DOCUMENT_SIGNING_EKUS = {
    "1.3.6.1.5.5.7.3.36": "document_signing",  # id-kp-documentSigning, RFC 9336
    "1.3.6.1.4.1.311.10.3.12": "microsoft_document_signing",
    "1.2.840.113583.1.1.5": "adobe_authentic_documents_trust",
    "1.3.6.1.5.5.7.3.4": "email_protection",  # S/MIME: signs documents in Adobe Reader too
    "2.5.29.37.0": "any_extended_key_usage",
}


def signing_eku_problem(cert: Any) -> str | None:
    """Why an issued certificate may not sign reports (its extended key usage), or None."""
    eku = cert.extended_key_usage_value
    if eku is None:
        return "not for signing documents (no extended key usage)"
    dotted = [p.dotted for p in eku]
    if any(o in DOCUMENT_SIGNING_EKUS for o in dotted):
        return None
    return f"not for signing documents (extended key usage: {', '.join(p.native for p in eku)})"


_MAX_NAME_NODES = 10_000


def read_attachments(reader: PdfFileReader) -> dict[str, bytes]:
    """Embedded files of a PDF by name (flat name tree, as ``finalize_pdf`` writes it)."""
    out: dict[str, bytes] = {}
    try:
        names = reader.root["/Names"]["/EmbeddedFiles"]
    except KeyError:
        return out
    stack = [_deref(names)]
    visited = 0
    while stack:
        node = stack.pop()
        visited += 1
        if visited > _MAX_NAME_NODES:  # a damaged tree can loop (a node among its own kids)
            raise ValueError(f"more than {_MAX_NAME_NODES} nodes in the attachments' name tree")
        if "/Kids" in node:
            stack.extend(_deref(k) for k in _deref(node["/Kids"]))
        arr = _deref(node["/Names"]) if "/Names" in node else []
        for i in range(0, len(arr) - 1, 2):
            spec = _deref(arr[i + 1])
            try:
                out[str(_deref(arr[i]))] = _deref(_deref(spec["/EF"])["/F"]).data
            except (KeyError, TypeError, AttributeError):
                continue
    return out


def _deref(obj: Any) -> Any:
    """A pyHanko indirect reference resolved; anything else as it is."""
    return obj.get_object() if hasattr(obj, "get_object") else obj


def _info_keywords(reader: PdfFileReader) -> str:
    try:
        return str(reader.trailer["/Info"].get("/Keywords", ""))
    except Exception:  # a damaged file may fail anywhere in the tree: no keywords then
        return ""


def verify_pdf(
    path: str | Path,
    cert: str | Path | Iterable[str | Path] | None = None,
    *,
    integrity_only: bool = False,
    tsa_cert: Iterable[str | Path] = (),
) -> VerifyResult:
    """Check ``path``; ``cert`` is one certificate file or several (the trust anchors).

    Without ``cert`` the signer is untrusted and the result fails, unless ``integrity_only``.
    ``tsa_cert``: the anchors of the timestamp authorities; a timestamp from any other TSA is
    untrusted (and, when ``tsa_cert`` is given, fails the result).
    """
    path = Path(path)
    certs = [] if cert is None else [cert] if isinstance(cert, str | Path) else list(cert)
    if integrity_only and certs:
        raise InputError("--integrity-only: cannot be combined with --cert (which asks for the signer to be checked)")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a PDF report")
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    anchors = load_trust_anchors(certs)
    tsa_anchors = load_trust_anchors(tsa_cert, "--tsa-cert")

    res = VerifyResult(file=str(path), integrity_only=integrity_only)
    res.trust_anchors = [a.sha256.hex(":").upper() for a in anchors]
    res.tsa_anchors = [a.sha256.hex(":").upper() for a in tsa_anchors]
    from soak.tomlfile import read_regular_file

    data = read_regular_file(path, "", InputError, MAX_PDF_BYTES)
    # A file that is no PDF at all is the wrong input (exit 2), not a report that fails its
    # checks; readers accept the header anywhere in the first 1024 bytes.
    if b"%PDF-" not in data[:1024]:
        raise InputError(f"{path}: not a PDF file (no %PDF- header)")
    from pyhanko.pdf_utils.reader import PdfFileReader
    from pyhanko.sign.fields import enumerate_sig_fields

    try:
        reader = PdfFileReader(io.BytesIO(data), strict=False)
        # The fields only: parsing each signature's CMS is the signature check's job, so a
        # damaged signature is reported as such and not as a damaged file.
        fields = list(enumerate_sig_fields(reader, filled_status=True))
    except Exception as exc:  # pyHanko on a damaged file: PdfError, but also OverflowError (startxref 10^20) and more
        res.detail = str(exc)
        res.fail(UNREADABLE_PDF, "not a readable PDF: the file is damaged or truncated")
        return res

    _read_metadata(reader, res)
    if not fields:
        res.fail(UNSIGNED, "the PDF is not signed")
        return res
    res.signed = True
    sig = _embedded_signature(reader, fields, res)
    if sig is not None:
        _check_signature(sig, anchors, tsa_anchors, res)
        if res.intact and res.valid and not contents_exact(data, sig):
            res.fail(TAMPERED, "tampered: the signature's /Contents holds bytes beyond the signature (its padding "
                               "changed after signing)")
    return res


def _der_length(der: bytes) -> int | None:
    """The length of the DER value at the start of ``der`` (tag, length, contents)."""
    if len(der) < 2:
        return None
    first = der[1]
    if first < 0x80:
        return 2 + first
    n = first & 0x7F
    if n == 0 or n > 4 or len(der) < 2 + n:
        return None
    return 2 + n + int.from_bytes(der[2:2 + n], "big")


def contents_exact(data: bytes, sig: EmbeddedPdfSignature) -> bool:
    """Whether the gap the byte range leaves is exactly ``<hex>``: the signature's DER, then
    zero padding, in one case of hex digits. The gap is outside the signed bytes, so without
    this a changed padding byte (or a digit in another case) went unseen."""
    try:
        a, b, c, _ = (int(x) for x in sig.sig_object["/ByteRange"])
    except (KeyError, TypeError, ValueError):
        return False
    gap = data[a + b:c]
    if len(gap) < 2 or gap[:1] != b"<" or gap[-1:] != b">":
        return False
    digits = gap[1:-1]
    try:
        raw = bytes.fromhex(digits.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return False
    if digits not in (raw.hex().encode(), raw.hex().upper().encode()):
        return False
    end = _der_length(raw)
    return end is not None and end <= len(raw) and not raw[end:].strip(b"\0")


def _read_metadata(reader: PdfFileReader, res: VerifyResult) -> None:
    kw = _info_keywords(reader)
    m = _DIGEST_RE.search(kw)
    if m and m.group(1) != "N/A":
        res.data_sha256 = m.group(1)
    m = _RUN_RE.search(kw)
    if m:
        res.run_id = m.group(1)
    from pyhanko.pdf_utils.misc import PdfDecodeLimitError

    try:
        atts = read_attachments(reader)
    except PdfDecodeLimitError as exc:
        res.detail = str(exc)
        mib = attachment_limit_bytes() // (1024 * 1024)
        res.fail(ATTACHMENTS_UNREADABLE, f"an attachment decodes to more than pyHanko allows an untrusted PDF "
                                         f"({mib} MiB, or 1100 times its compressed size): not read, so the raw "
                                         "data cannot be checked")
        return
    except Exception as exc:  # a damaged file may fail anywhere in the tree
        res.detail = str(exc)
        res.fail(ATTACHMENTS_UNREADABLE, "the attachments cannot be read (damaged file)")
        return
    res.attachments = sorted(atts)
    meta: Any = None
    if FINDINGS_NAME in atts:
        try:
            meta = json.loads(atts[FINDINGS_NAME])
            res.verdict = meta.get("verdict")
            res.run_id = res.run_id or meta.get("run_id")
            res.data_sha256 = res.data_sha256 or meta.get("raw_data_sha256")
        except (ValueError, AttributeError):
            res.fail(FINDINGS_UNREADABLE, f"{FINDINGS_NAME}: attachment is not valid JSON")
    if RAW_NAME in atts:
        res.data_sha256_attached = hashlib.sha256(atts[RAW_NAME]).hexdigest()
        if res.data_sha256 and res.data_sha256 != res.data_sha256_attached:
            res.fail(DATA_MISMATCH, "the attached raw data does not match the digest printed in the report")
    _check_digested(atts, meta, res, CHIPS_NAME, "chips_csv_sha256")
    _check_digested(atts, meta, res, PROFILE_NAME, "profile_sha256")


def _check_digested(atts: dict[str, bytes], meta: Any, res: VerifyResult, name: str, key: str) -> None:
    """An attachment whose digest the findings document holds (a cluster report's per-chip
    CSV, the acceptance profile) must be the one it names; one without a digest is foreign."""
    want = meta.get(key) if isinstance(meta, dict) else None
    if want is None and name not in atts:
        return
    got = hashlib.sha256(atts[name]).hexdigest() if name in atts else None
    if got != want:
        res.fail(DATA_MISMATCH, f"the attached {name} does not match the digest in {FINDINGS_NAME}")


def _embedded_signature(reader: PdfFileReader, fields: list, res: VerifyResult) -> EmbeddedPdfSignature | None:
    """The last signature of the file, or None (and a failure) when one cannot be parsed."""
    from pyhanko.sign.validation.pdf_embedded import EmbeddedPdfSignature

    sigs = []
    for fq_name, _sig_obj, sig_field in fields:
        try:
            sigs.append(EmbeddedPdfSignature(reader, sig_field, fq_name))
        except Exception as exc:  # a flipped byte in the CMS fails anywhere in asn1crypto
            res.detail = str(exc)
            res.fail(SIGNATURE_UNREADABLE, "signature unreadable: the signature data in the PDF is damaged and cannot be checked")
            return None
    if len(sigs) > 1:
        res.fail(SEVERAL_SIGNATURES, f"{len(sigs)} signatures found; a soak report carries one")
    return max(sigs, key=lambda s: s.signed_revision)


def _demo_subject(subject: dict[str, Any]) -> bool:
    """Whether a signer's subject (asn1crypto's native form) is the soak demo's key."""
    from soak.report.signing import DEMO_COMMON_NAME, DEMO_UNIT

    def values(key: str) -> list[str]:
        v = subject.get(key)
        return [] if v is None else [v] if isinstance(v, str) else list(v)

    return DEMO_UNIT in values("organizational_unit_name") or values("common_name") == [DEMO_COMMON_NAME]


def _check_signature(sig: EmbeddedPdfSignature, anchors: list, tsa_anchors: list, res: VerifyResult) -> None:
    from pyhanko.sign.validation import validate_pdf_signature
    from pyhanko.sign.validation.status import SignatureCoverageLevel
    from pyhanko_certvalidator import ValidationContext

    # Without anchors, anchor the chain on the signer's own certificate only so that pyHanko
    # never consults (or depends on) the operating system's trust store; trust is then judged
    # "no anchor" by _judge_trust, never by this validation.
    roots = anchors or [c for c in [getattr(sig, "signer_cert", None)] if c is not None]
    vc = ValidationContext(trust_roots=roots, allow_fetching=False) if roots else None
    # The timestamp's chain on the TSA anchors only (pyHanko's default is the signer's context,
    # and a vendor's --cert says nothing about who may vouch for the time); without any, on
    # the signer's roots as above, so that the OS trust store is never asked either.
    ts_roots = tsa_anchors or roots
    tsvc = ValidationContext(trust_roots=ts_roots, allow_fetching=False) if ts_roots else None
    # pyHanko logs an untrusted chain as an error; the result carries it, so keep stderr clean.
    logging.getLogger("pyhanko").setLevel(logging.CRITICAL)
    logging.getLogger("pyhanko_certvalidator").setLevel(logging.CRITICAL)
    try:
        st = validate_pdf_signature(sig, signer_validation_context=vc, ts_validation_context=tsvc)
    except Exception as exc:  # a damaged CMS fails in pyHanko, asn1crypto or cryptography
        res.detail = str(exc)
        res.fail(SIGNATURE_UNREADABLE, "signature unreadable: the signature data in the PDF is damaged and cannot be checked")
        return
    res.intact = bool(st.intact)
    res.valid = bool(st.valid)
    res.coverage_entire_file = st.coverage == SignatureCoverageLevel.ENTIRE_FILE
    cert = st.signing_cert
    if cert is not None:
        res.signer = cert.subject.human_friendly
        res.signer_fingerprint_sha256 = cert.sha256.hex(":").upper()
        res.signer_demo_key = _demo_subject(cert.subject.native)
    if st.signer_reported_dt is not None:
        res.signing_time = st.signer_reported_dt.isoformat()
    ts = getattr(st, "timestamp_validity", None)
    if ts is not None:
        res.timestamped = True
        res.timestamp_time = ts.timestamp.isoformat()
        tsa = ts.signing_cert
        res.timestamp_tsa = None if tsa is None else tsa.subject.human_friendly
        res.timestamp_trusted = bool(tsa_anchors) and bool(ts.trusted)
        if not (ts.intact and ts.valid):
            res.timestamp_trusted = False
            res.fail(TIMESTAMP_INVALID, "timestamp invalid: its token does not verify or is not over this signature "
                                        "(swapped or damaged)")
        elif tsa_anchors and not res.timestamp_trusted:
            res.fail(UNTRUSTED_TIMESTAMP, f"untrusted timestamp: its TSA {res.timestamp_tsa} is not a --tsa-cert "
                                          "certificate nor issued by one, so its time says nothing of when this was signed")
    if not res.valid:
        # The signature itself does not verify: whether the content changed cannot be told
        # from it, and nobody can be named as the signer.
        res.fail(SIGNATURE_INVALID, "signature invalid: it does not verify with the certificate in it (damaged or forged)")
        return
    if not res.intact:
        res.fail(TAMPERED, "tampered: the signed content no longer matches the digest the signer signed (changed after signing)")
    if not res.coverage_entire_file:
        res.fail(APPENDED, "appended: content was added after signing (the signature does not cover the whole file)")
    if anchors:
        # pyHanko's own `trusted` also requires `intact`; here trust answers only "who signed".
        res.trusted = st.validation_path is not None and st.trust_problem_indic is None
        # a --cert certificate itself is pinned; one a --cert CA issued must be for documents
        eku = None
        if res.trusted and res.signer_fingerprint_sha256 not in res.trust_anchors and cert is not None:
            eku = signing_eku_problem(cert)
            res.trusted = eku is None
        if not res.trusted:
            why = "is not a --cert certificate nor issued by one"
            if eku is not None:
                why = f"is issued by a --cert certificate but {eku}"
            if res.signer_fingerprint_sha256 in res.trust_anchors and st.trust_problem_indic is not None:
                why = f"is a --cert certificate but does not validate ({st.trust_problem_indic.name.lower().replace('_', ' ')})"
            res.fail(UNTRUSTED_SIGNER, f"untrusted signer: {res.signer} (SHA-256 {res.signer_fingerprint_sha256}) {why}")
    elif not res.integrity_only:
        res.trusted = False
        res.fail(
            NO_TRUST_ANCHOR,
            "signer not trusted: no --cert given, so nothing says who made this signature; pass the "
            "vendor's certificate with --cert (or --integrity-only to check integrity alone)",
        )

