"""The bytes of ``/Contents`` outside the signature's DER: the padding after it is outside
the signed byte range, so a change there was not seen (``signing.py`` claimed "one changed
byte anywhere breaks it")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from soak.report.build import build_pdf
from soak.report.verify import verify_pdf
from soak.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.compute]  # signs a real PDF


def _contents_gap(data: bytes) -> tuple[int, int]:
    """[start, end) of the hex digits of the last signature's /Contents."""
    m = list(re.finditer(rb"/ByteRange\s*\[\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\]", data))[-1]
    a, b, c, _ = map(int, m.groups())
    assert data[a + b:a + b + 1] == b"<" and data[c - 1:c] == b">"
    return a + b + 1, c - 1


@pytest.fixture(scope="module")
def signed(recorded, keys, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("contents") / "signed.pdf"
    with Store.open(recorded["db"], create=False) as store:
        build_pdf(store, recorded["run_id"], out, keys=keys)
    return out


def test_a_changed_padding_byte_in_contents_is_tampering(signed, keys, tmp_path):
    data = signed.read_bytes()
    start, end = _contents_gap(data)
    hexdigits = data[start:end]
    assert hexdigits.endswith(b"0000")  # the padding pyHanko reserves after the DER
    changed = bytearray(data)
    changed[end - 1] = ord("1")  # the last padding nibble
    (tmp_path / "pad.pdf").write_bytes(changed)

    assert verify_pdf(signed, keys.cert_path).ok
    res = verify_pdf(tmp_path / "pad.pdf", keys.cert_path)
    assert not res.ok and res.failures == ["tampered"], res.problems
    assert res.problems == ["tampered: the signature's /Contents holds bytes beyond the signature (its padding "
                            "changed after signing)"]


def test_a_hex_digit_written_in_another_case_is_tampering(signed, keys, tmp_path):
    # the same bytes decoded, another file: "one changed byte anywhere" must still hold
    data = bytearray(signed.read_bytes())
    start, end = _contents_gap(bytes(data))
    at = next(i for i in range(start, end) if chr(data[i]) in "abcdefABCDEF")
    data[at] = ord(chr(data[at]).swapcase())
    (tmp_path / "case.pdf").write_bytes(bytes(data))
    res = verify_pdf(tmp_path / "case.pdf", keys.cert_path)
    assert not res.ok and "tampered" in res.failures, res.problems


def test_an_attachment_over_pyhankos_decode_limit_is_one_line_before_anything_is_written():
    from soak.errors import InputError
    from soak.report.signing import Attachment, attachment_limit_bytes, finalize_pdf

    limit = attachment_limit_bytes()
    assert limit == 256 * 1024 * 1024  # pyHanko's StreamDecodeLimits.max_output_size
    big = Attachment("soak-raw.csv", bytes(limit + 1), "text/csv", "raw")
    with pytest.raises(InputError) as err:
        finalize_pdf(b"%PDF-1.7 never read", attachments=[big])
    assert str(err.value) == ("soak-raw.csv is 256 MiB, over the 256 MiB one PDF attachment may decode to (pyHanko's "
                              "limit for untrusted PDFs, which soak verify applies): no PDF is written; the raw data "
                              "stays in the run's store")


def test_verify_names_an_attachment_over_the_decode_limit_in_one_line(recorded, tmp_path):
    import io
    import zlib

    from pyhanko.pdf_utils import embed, generic
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter

    draft = tmp_path / "draft.pdf"
    with Store.open(recorded["db"], create=False) as store:
        build_pdf(store, recorded["run_id"], draft)
    w = IncrementalPdfFileWriter(io.BytesIO(draft.read_bytes()))
    ef = embed.EmbeddedFileObject(w, dict_data={generic.pdf_name("/Filter"): generic.pdf_name("/FlateDecode")},
                                  encoded_data=zlib.compress(bytes(300 * 1024 * 1024), 1), mime_type="text/csv")
    embed.embed_file(w, embed.FileSpec("big.csv", file_name="big.csv", embedded_data=ef))
    out = io.BytesIO()
    w.write(out)
    (tmp_path / "big.pdf").write_bytes(out.getvalue())
    res = verify_pdf(tmp_path / "big.pdf", integrity_only=True)
    assert "attachments-unreadable" in res.failures
    assert ("an attachment decodes to more than pyHanko allows an untrusted PDF (256 MiB, or 1100 times its "
            "compressed size): not read, so the raw data cannot be checked") in res.problems
