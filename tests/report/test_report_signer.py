"""The signer is stated: the PDF and `soak verify` name who signed, and a report signed with the
demo's key says so on its cover (`soak report pdf` warns). The demo's key is its own, never the
default key a real run's report is signed with."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from soak.cli import main
from soak.commands.demo import demo_keys
from soak.report.signing import create_keys, default_keypair, signer_of
from tests.report.figures import pdf_text

pytestmark = pytest.mark.compute  # pyproject.toml

poppler = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")


def test_the_demos_key_is_marked_and_not_the_default(tmp_path) -> None:
    keys = demo_keys(tmp_path)
    signer = signer_of(keys.cert_path)
    assert signer.demo and signer.name.startswith("soak demo signer")
    assert default_keypair(tmp_path) is None  # a real run's report is never signed with it
    assert demo_keys(tmp_path) == keys  # made once
    own = create_keys(tmp_path / "keys", common_name="Delivery Engineer", organization="ACME Delivery")
    assert default_keypair(tmp_path) == own
    assert signer_of(own.cert_path) == signer_of(own.cert_path)
    assert not signer_of(own.cert_path).demo and signer_of(own.cert_path).name == "Delivery Engineer, ACME Delivery"


def test_a_demo_key_made_before_it_was_marked_is_known_by_its_name(tmp_path) -> None:
    # releases before this one made the demo's key in the default folder, unmarked
    old = create_keys(tmp_path / "keys", common_name="soak demo signer")
    assert signer_of(old.cert_path).demo


@pytest.mark.slow
@poppler
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_report_signed_with_the_demo_key_says_so_and_names_its_signer(recorded, tmp_path, capsys,
                                                                        lang: str) -> None:
    keys = demo_keys(tmp_path / "demo")
    out = tmp_path / "demo.pdf"
    assert main(["report", "pdf", recorded["run_id"], "--data-dir", str(recorded["data_dir"]), "-o", str(out),
                 "--lang", lang, "--key", str(keys.key_path), "--cert", str(keys.cert_path)]) == 0
    err = capsys.readouterr().err
    assert "warning: signed with the soak demo's key (soak demo signer" in err and "soak keys init" in err, err
    cover = pdf_text(out, "-f", "1", "-l", "1")
    text = pdf_text(out)
    if lang == "en":
        assert "Signed with the soak demo's key: not an acceptance signature" in cover, cover
        assert "Signed by: soak demo signer" in text
    else:
        assert "使用 soak 演示密钥签名：不构成验收签名" in cover, cover
        assert "签名者：soak demo signer" in text
    assert main(["verify", str(out), "--cert", str(keys.cert_path)]) == 0
    said = capsys.readouterr().out
    (line,) = [ln for ln in said.splitlines() if ln.startswith("signer:")]
    assert "soak demo signer" in line and line.endswith("(the soak demo's key: not an acceptance signature)"), said


@pytest.mark.slow
@poppler
def test_a_report_signed_with_an_own_key_names_it_and_warns_of_nothing(recorded, keys, tmp_path, capsys) -> None:
    out = tmp_path / "own.pdf"
    assert main(["report", "pdf", recorded["run_id"], "--data-dir", str(recorded["data_dir"]), "-o", str(out),
                 "--key", str(keys.key_path), "--cert", str(keys.cert_path)]) == 0
    cap = capsys.readouterr()
    assert "warning" not in cap.err
    assert "signed by Test Delivery Engineer, soak tests; certificate SHA-256 fingerprint" in cap.out
    text = pdf_text(out)
    assert "demo's key" not in text
    fp = signer_of(keys.cert_path).fingerprint_sha256
    assert "Signed by: Test Delivery Engineer, soak tests" in text and fp[:23] in text.replace("\n", " ")
    assert main(["verify", str(out), "--cert", str(keys.cert_path), "--format", "json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["signer_demo_key"] is False and "Common Name: Test Delivery Engineer" in doc["signer"]


def _stamp_text(pdf) -> tuple[str, str]:
    """The signature stamp as drawn: (its content streams, the characters its fonts' ToUnicode
    maps give), read out of the signature field's appearance."""
    import re

    from pyhanko.pdf_utils.generic import ArrayObject, DictionaryObject, StreamObject
    from pyhanko.pdf_utils.reader import PdfFileReader

    streams: list[bytes] = []
    chars: set[str] = set()
    seen: set[int] = set()

    def walk(obj, key: str = "") -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, StreamObject):
            data = obj.data
            if key == "/ToUnicode":
                for block in re.findall(rb"beginbfchar(.*?)endbfchar", data, re.S):
                    for _src, dst in re.findall(rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block):
                        chars.add(bytes.fromhex(dst.decode()).decode("utf-16-be"))
                for block in re.findall(rb"beginbfrange(.*?)endbfrange", data, re.S):
                    for lo, hi, dst in re.findall(rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*(<[0-9A-Fa-f]+>|\[[^]]*\])",
                                                  block):
                        if dst.startswith(b"["):  # one destination per code
                            chars.update(bytes.fromhex(h.decode()).decode("utf-16-be")
                                         for h in re.findall(rb"<([0-9A-Fa-f]+)>", dst))
                        else:  # consecutive destinations from the first
                            first = ord(bytes.fromhex(dst[1:-1].decode()).decode("utf-16-be"))
                            chars.update(chr(first + k) for k in range(int(hi, 16) - int(lo, 16) + 1))
            elif key != "/FontFile2" and key != "/FontFile3":
                streams.append(data)
        if isinstance(obj, DictionaryObject):
            for k in obj:
                if k in ("/P", "/Parent", "/V"):  # the page, the form, the signature: not the stamp
                    continue
                walk(obj.raw_get(k).get_object() if hasattr(obj.raw_get(k), "get_object") else obj[k], k)
        elif isinstance(obj, ArrayObject):
            for v in obj:
                walk(v.get_object() if hasattr(v, "get_object") else v, key)

    with open(pdf, "rb") as fh:
        reader = PdfFileReader(fh)
        (field,) = [f.get_object() for f in reader.root["/AcroForm"]["/Fields"]
                    if f.get_object().get("/FT") == "/Sig"]
        walk(field["/AP"]["/N"])
    return b"\n".join(streams).decode("latin-1"), "".join(sorted(chars))


@pytest.mark.slow
def test_the_signature_stamp_is_in_the_reports_language_and_draws_the_signers_own_name(recorded, tmp_path) -> None:
    # pyhanko's own stamp font draws ASCII only: a signer named in Chinese came out as mojibake
    # (a UTF-16 byte-order mark and Latin-1), and the Chinese report's stamp was English
    keys = create_keys(tmp_path / "keys", common_name="张工 Delivery", organization="ACME")
    for lang, words in (("zh", ("签名者：", "签名时间：", "结论：未通过")), ("en", ("Signed by: ", "Time: ", "Verdict: FAIL"))):
        out = tmp_path / f"{lang}.pdf"
        assert main(["report", "pdf", recorded["run_id"], "--data-dir", str(recorded["data_dir"]), "-o", str(out),
                     "--lang", lang, "--key", str(keys.key_path), "--cert", str(keys.cert_path)]) == 0
        _, drawn = _stamp_text(out)
        for w in (*words, "张工 Delivery"):
            assert set(w) <= set(drawn), (lang, w, drawn)
        assert main(["verify", str(out), "--cert", str(keys.cert_path)]) == 0
    # an ASCII signer in English: pyhanko's own font, the lines as written
    own = create_keys(tmp_path / "own", common_name="Test Engineer")
    out = tmp_path / "ascii.pdf"
    assert main(["report", "pdf", recorded["run_id"], "--data-dir", str(recorded["data_dir"]), "-o", str(out),
                 "--key", str(own.key_path), "--cert", str(own.cert_path)]) == 0
    content, drawn = _stamp_text(out)
    assert "(Signed by\\072 Test Engineer)" in content and "(Verdict\\072 FAIL)" in content and not drawn


@pytest.mark.slow
@pytest.mark.parametrize(("font", "chinese"), [("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", True),
                                               ("/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf", False)])
def test_the_stamp_in_each_cjk_font_or_in_english_naming_the_certificate(recorded, tmp_path, font: str,
                                                                          chinese: bool) -> None:
    # Noto CJK (OpenType/CFF, a collection) draws the Chinese stamp; Droid Sans Fallback has
    # no Latin letter and no digit, so no one font draws the lines: English, and the signer
    # named by the certificate's fingerprint rather than a name no font draws
    if not Path(font).is_file():
        pytest.skip(f"{font} not installed (scripts/system-packages.sh installs it)")
    keys = create_keys(tmp_path / "keys", common_name="张工", organization="ACME")
    out = tmp_path / "zh.pdf"
    assert main(["report", "pdf", recorded["run_id"], "--data-dir", str(recorded["data_dir"]), "-o", str(out),
                 "--lang", "zh", "--font", font, "--key", str(keys.key_path), "--cert", str(keys.cert_path)]) == 0
    content, drawn = _stamp_text(out)
    if chinese:
        assert set("签名者：张工签名时间结论未通过原始数据") <= set(drawn), drawn
    else:
        fp = signer_of(keys.cert_path).fingerprint_sha256[:23].replace(":", "\\072")
        assert f"(Signed by\\072 certificate SHA\\055256 {fp}" in content and not drawn, content
    assert main(["verify", str(out), "--cert", str(keys.cert_path)]) == 0
