"""Check a signed soak report: ``soak verify FILE [--cert CERT]``.

Reports whether the signature is intact (the signed bytes are unchanged), valid (the
cryptography checks out), covers the entire file (nothing appended after signing), and, with
``--cert``, trusted (signed by that certificate). It also reads back the raw-data digest the
report printed and recomputes it from the attached CSV, so the customer can check that the data
attached is the data the verdict was built from.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from soak.errors import InputError

RAW_NAME = "soak-raw.csv"
FINDINGS_NAME = "soak-findings.json"
_DIGEST_RE = re.compile(r"soak-data-sha256:([0-9a-f]{64}|N/A)")
_RUN_RE = re.compile(r"soak-run-id:(\S+)")


@dataclass
class VerifyResult:
    file: str
    signed: bool = False
    intact: bool | None = None
    valid: bool | None = None
    coverage_entire_file: bool | None = None
    trusted: bool | None = None  # None when no --cert was given
    signer: str | None = None
    signer_fingerprint_sha256: str | None = None
    signing_time: str | None = None
    timestamped: bool = False
    timestamp_time: str | None = None
    run_id: str | None = None
    verdict: str | None = None
    data_sha256: str | None = None  # as printed in the report's metadata
    data_sha256_attached: str | None = None  # recomputed from the attached CSV
    attachments: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["ok"] = self.ok
        return d


def read_attachments(reader) -> dict[str, bytes]:  # noqa: ANN001 - pyHanko PdfFileReader
    """Embedded files of a PDF by name (flat name tree, as ``finalize_pdf`` writes it)."""
    out: dict[str, bytes] = {}
    try:
        names = reader.root["/Names"]["/EmbeddedFiles"]
    except KeyError:
        return out
    stack = [_deref(names)]
    while stack:
        node = stack.pop()
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


def _deref(obj):  # noqa: ANN001, ANN202 - pyHanko generic objects
    return obj.get_object() if hasattr(obj, "get_object") else obj


def _info_keywords(reader) -> str:  # noqa: ANN001
    try:
        return str(reader.trailer["/Info"].get("/Keywords", ""))
    except (KeyError, TypeError):
        return ""


def verify_pdf(path: str | Path, cert: str | Path | None = None) -> VerifyResult:
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a PDF report")
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    trust_roots = []
    if cert is not None:
        from pyhanko.keys import load_cert_from_pemder

        cert_path = Path(cert)
        if not cert_path.is_file():
            raise InputError(f"--cert {cert}: no such file")
        try:
            trust_roots.append(load_cert_from_pemder(str(cert_path)))
        except (ValueError, OSError) as exc:
            raise InputError(f"--cert {cert}: not a PEM/DER certificate: {exc}") from exc

    res = VerifyResult(file=str(path))
    data = path.read_bytes()
    # A file that is no PDF at all is the wrong input (exit 2), not a report that fails its
    # checks; readers accept the header anywhere in the first 1024 bytes.
    if b"%PDF-" not in data[:1024]:
        raise InputError(f"{path}: not a PDF file (no %PDF- header)")
    from pyhanko.pdf_utils.misc import PdfError
    from pyhanko.pdf_utils.reader import PdfFileReader

    try:
        import io

        reader = PdfFileReader(io.BytesIO(data), strict=False)
        sigs = list(reader.embedded_signatures)
    except (PdfError, ValueError, KeyError, TypeError, IndexError) as exc:
        res.problems.append(f"not a readable PDF: {exc}")
        return res

    _read_metadata(reader, res)
    if not sigs:
        res.problems.append("the PDF is not signed")
        return res
    res.signed = True
    _check_signature(sigs[-1], trust_roots, cert is not None, res)
    if len(sigs) > 1:
        res.problems.append(f"{len(sigs)} signatures found; only the last was checked")
    return res


def _read_metadata(reader, res: VerifyResult) -> None:  # noqa: ANN001
    kw = _info_keywords(reader)
    m = _DIGEST_RE.search(kw)
    if m and m.group(1) != "N/A":
        res.data_sha256 = m.group(1)
    m = _RUN_RE.search(kw)
    if m:
        res.run_id = m.group(1)
    try:
        atts = read_attachments(reader)
    except Exception as exc:  # noqa: BLE001 - a damaged file may fail anywhere in the tree
        res.problems.append(f"attachments unreadable: {exc}")
        return
    res.attachments = sorted(atts)
    if FINDINGS_NAME in atts:
        try:
            meta = json.loads(atts[FINDINGS_NAME])
            res.verdict = meta.get("verdict")
            res.run_id = res.run_id or meta.get("run_id")
            res.data_sha256 = res.data_sha256 or meta.get("raw_data_sha256")
        except (ValueError, AttributeError):
            res.problems.append(f"{FINDINGS_NAME}: attachment is not valid JSON")
    if RAW_NAME in atts:
        res.data_sha256_attached = hashlib.sha256(atts[RAW_NAME]).hexdigest()
        if res.data_sha256 and res.data_sha256 != res.data_sha256_attached:
            res.problems.append("the attached raw data does not match the digest printed in the report")


def _check_signature(sig, trust_roots: list, want_trust: bool, res: VerifyResult) -> None:  # noqa: ANN001
    from pyhanko.sign.validation import validate_pdf_signature
    from pyhanko.sign.validation.errors import SignatureValidationError
    from pyhanko.sign.validation.status import SignatureCoverageLevel
    from pyhanko_certvalidator import ValidationContext

    # Without --cert, trust is not judged: anchor the chain on the signer's own certificate so
    # validation never consults (or depends on) the operating system's trust store.
    roots = trust_roots or [c for c in [getattr(sig, "signer_cert", None)] if c is not None]
    vc = ValidationContext(trust_roots=roots, allow_fetching=False) if roots else None
    # pyHanko logs an untrusted chain as an error; the result carries it, so keep stderr clean.
    logging.getLogger("pyhanko").setLevel(logging.CRITICAL)
    logging.getLogger("pyhanko_certvalidator").setLevel(logging.CRITICAL)
    try:
        st = validate_pdf_signature(sig, signer_validation_context=vc)
    except (SignatureValidationError, ValueError, KeyError, TypeError) as exc:
        res.intact = False
        res.valid = False
        res.problems.append(f"signature cannot be validated: {exc}")
        return
    res.intact = bool(st.intact)
    res.valid = bool(st.valid)
    res.coverage_entire_file = st.coverage == SignatureCoverageLevel.ENTIRE_FILE
    cert = st.signing_cert
    if cert is not None:
        res.signer = cert.subject.human_friendly
        res.signer_fingerprint_sha256 = cert.sha256.hex(":").upper()
    if st.signer_reported_dt is not None:
        res.signing_time = st.signer_reported_dt.isoformat()
    ts = getattr(st, "timestamp_validity", None)
    if ts is not None:
        res.timestamped = True
        res.timestamp_time = ts.timestamp.isoformat()
    if want_trust:
        res.trusted = bool(st.trusted) and res.intact and res.valid
    if not res.intact:
        res.problems.append("the signed content was changed after signing (not intact)")
    if not res.valid:
        res.problems.append("the signature is not cryptographically valid")
    if not res.coverage_entire_file:
        res.problems.append("the signature does not cover the entire file (content appended after signing)")
    if want_trust and not res.trusted:
        res.problems.append("not signed by the given --cert (untrusted signer)")
