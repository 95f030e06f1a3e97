"""One call from a run in the store to the final (signed) PDF on disk.

Used by ``soak report pdf``, the app's download button and ``soak demo``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soak import runfolder
from soak.errors import InputError, StoreError, UnknownRun
from soak.report.model import Customer, ReportData
from soak.report.pdf import RawData, render_pdf
from soak.report.signing import Attachment, KeyPair, check_attachment, finalize_pdf
from soak.report.verify import FINDINGS_NAME, PROFILE_NAME, RAW_NAME

if TYPE_CHECKING:
    from soak.report.signing import Signer
    from soak.store import Store


@dataclass(frozen=True)
class BuiltReport:
    path: Path
    signed: bool
    data_sha256: str
    data_rows: int
    verdict: str | None
    pages: int | None = None
    fonts: tuple[str, ...] = ()  # the fonts it drew with, as its metadata names them


def resolve_store_url(run_id: str | None, db: str | None, data_dir: str | os.PathLike[str] | None) -> str:
    """``--db`` when given, else the run folder's ``soak.db``."""
    if db:
        return db
    base = data_dir or runfolder.DEFAULT_DATA_DIR
    if run_id is None:
        raise StoreError(f"--db is required when no run id is given (or point --data-dir at {base})")
    path = runfolder.db_path(runfolder.run_dir(base, run_id))
    if not path.is_file():
        raise UnknownRun(f"run {run_id}: no store at {path}; give --db URL if the run used another store",
                         data_dir=base)
    return str(path)


def findings_document(data: ReportData, sha256: str, rows: int) -> dict[str, Any]:
    """The JSON attachment: what the verdict rests on, machine-readable."""
    from soak.store import FINDING_KEYS

    return {
        "run_id": data.run.run_id,
        "verdict": data.verdict,
        "reasons": [r.text for r in data.verdict_reasons],
        "reasons_typed": [{"code": r.code, "values": dict(r.values)} for r in data.verdict_reasons],
        "clean_statement": None if data.clean_statement is None else data.clean_statement.text,
        "raw_data_sha256": sha256,
        "raw_data_rows": rows,
        "run": {k: v for k, v in asdict(data.run).items() if k != "plan"},
        "criteria": [asdict(c) for c in data.criteria],
        "findings": [
            {**dict(f.evidence), **{k: getattr(f, k) for k in FINDING_KEYS}}
            for f in data.findings
        ],
        # as before the report read the events' detail: that stays in the store (a capture's or a
        # link test's is large), and what the verdict rests on is the message
        "events": [{k: v for k, v in asdict(e).items() if k not in ("detail", "workload", "node")}
                   for e in data.events],
        "detectors": [asdict(d) for d in data.detectors],
        "links": data.links,  # every pair and node of the link test (the PDF may show fewer)
    }


def _cluster_attachments(data: ReportData, doc: dict[str, Any]) -> list[Attachment]:
    """A cluster run's full per-chip table as CSV; its digest goes into the findings document
    (which the signature covers) so ``soak verify`` can check it like the raw data."""
    if data.cluster is None:
        return []
    from soak.report.cluster import CHIPS_CSV_NAME, chips_csv

    table = chips_csv(data.cluster)
    doc["chips_csv_sha256"] = hashlib.sha256(table).hexdigest()
    doc["chips_csv_rows"] = len(data.cluster.cells)
    return [Attachment(CHIPS_CSV_NAME, table, "text/csv",
                       "every chip of the cluster: node, chip, verdict, coverage, key figures, findings")]


def _profile_attachment(store: Store, run_id: str, doc: dict[str, Any]) -> Attachment:
    """The acceptance profile the run was judged by, as the file ``soak analyze --profile``
    reads: the attached CSV analysed with it says the report's thresholds (its required
    runtime, not the default profile's). Its digest goes into the findings document."""
    from soak.runplan import plan_of, profile_of

    rec = store.get_run(run_id)
    text = profile_of(rec, plan_of(rec)).to_toml().encode("utf-8")
    doc["profile_sha256"] = hashlib.sha256(text).hexdigest()
    return Attachment(PROFILE_NAME, text, "application/toml",
                      f"the acceptance profile of the run: soak analyze {RAW_NAME} --profile {PROFILE_NAME}")


def _check_output(out: Path) -> None:
    """The PDF's path must name a file whose folder exists or can be made."""
    if out.is_dir():
        raise InputError(f"-o {out}: is a directory; name the PDF file, e.g. {out / 'acceptance.pdf'}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"-o {out}: cannot create its folder {out.parent} ({exc.strerror or exc})") from None


def _stamp(lang: str, run_id: str, verdict: str | None, sha: str, font: str | None,
           signer: Signer) -> dict[str, Any]:
    """The signature stamp's lines in the report's language, and the font that draws them
    (``finalize_pdf``'s ``stamp_lines``, ``stamp_font``). pyhanko's own font draws ASCII only:
    Chinese lines, or a signer named in another script, are drawn in the CJK font (else in
    DejaVu Sans) where it has every character; the lines fall back to English otherwise, and a
    signer's name no font draws whole to the certificate's fingerprint, never to mojibake."""
    from soak.report.fonts import register_symbol_fonts, stamp_face, try_register_cjk_font
    from soak.report.i18n import t, verdict_label

    def lines(lg: str) -> tuple[str, ...]:
        return (t("stamp_signer", lg), t("stamp_time", lg), t("stamp_run", lg).format(run=run_id),
                t("stamp_verdict", lg).format(verdict=verdict_label(verdict, lg)),
                t("stamp_data", lg).format(sha=sha[:16]))

    name = signer.name
    for lg in dict.fromkeys((lang, "en")):
        text = "".join(lines(lg)) + name
        if text.isascii():
            return {"stamp_lines": lines(lg), "stamp_font": None}
        for choice in (try_register_cjk_font(font), register_symbol_fonts()):
            face = None if choice is None else stamp_face(choice, text)
            if face is not None:
                return {"stamp_lines": lines(lg), "stamp_font": face}
    fingerprint = signer.fingerprint_sha256[:23]
    return {"stamp_lines": (t("stamp_signer_fp", "en").format(fingerprint=fingerprint), *lines("en")[1:]),
            "stamp_font": None}


def build_pdf(
    store: Store,
    run_id: str,
    out: str | os.PathLike[str],
    *,
    lang: str = "en",
    customer: Customer | None = None,
    keys: KeyPair | None = None,
    tsa_url: str | None = None,
    font: str | None = None,
    data: ReportData | None = None,
) -> BuiltReport:
    """Export the raw data, render, attach, sign; the file appears atomically at ``out``."""
    from soak.report.export import export_run
    from soak.report.loader import load_report_data

    out = Path(out)
    _check_output(out)  # before the expensive part: a bad -o is one line, not a traceback
    # One read of the raw data serves the attachment, its digest, the analysis and the charts.
    export = export_run(store, run_id)
    if data is None:
        data = load_report_data(store, run_id, arrays=export.arrays)
    raw_bytes, rows = export.csv, export.rows
    check_attachment(RAW_NAME, len(raw_bytes), run_id)  # before rendering: one line, nothing written
    sha = hashlib.sha256(raw_bytes).hexdigest()
    doc = findings_document(data, sha, rows)
    extra = [_profile_attachment(store, run_id, doc), *_cluster_attachments(data, doc)]
    pdf, slot, fonts = render_pdf(
        data,
        customer=customer,
        raw=RawData(sha, rows, RAW_NAME, PROFILE_NAME),
        lang=lang,
        font=font,
        signed=keys is not None,
        signer=None if keys is None else keys.signer,
    )
    final = finalize_pdf(
        pdf,
        attachments=[
            Attachment(RAW_NAME, raw_bytes, "text/csv", "raw samples of the run (timestamp,device,metric,value)"),
            Attachment(
                FINDINGS_NAME,
                json.dumps(doc, ensure_ascii=False, indent=1, default=str).encode("utf-8"),
                "application/json",
                "findings, verdict, criteria and events",
            ),
            *extra,
        ],
        keys=keys,
        slot_page=slot.page,
        slot_box=slot.box,
        tsa_url=tsa_url,
        location=(customer.site if customer else None),
        **({} if keys is None else _stamp(lang, run_id, data.verdict, sha, font, keys.signer)),  # unsigned: no stamp
    )
    tmp_out = out.with_name(f".{out.name}.tmp")
    try:
        tmp_out.write_bytes(final)
        os.replace(tmp_out, out)
    except OSError as exc:
        tmp_out.unlink(missing_ok=True)
        raise InputError(f"-o {out}: cannot write the PDF ({exc.strerror or exc})") from None
    return BuiltReport(out, keys is not None, sha, rows, data.verdict, slot.page + 1, fonts)
