"""The signer is stated: the PDF and `soak verify` name who signed, and a report signed with the
demo's key says so on its cover (`soak report pdf` warns). The demo's key is its own, never the
default key a real run's report is signed with."""

from __future__ import annotations

import shutil

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
