"""Signing and ``soak verify``: fresh passes; tampered, foreign-key, appended and unsigned fail."""

from __future__ import annotations

import io
import json
import os
import stat

import pytest

from soak.cli import main
from soak.report.build import build_pdf
from soak.report.signing import KeyFileError, create_keys, load_keypair
from soak.store import Store


@pytest.fixture(scope="module")
def signed_pdf(recorded, keys, tmp_path_factory):
    out = tmp_path_factory.mktemp("verify") / "signed.pdf"
    with Store.open(recorded["db"], create=False) as store:
        built = build_pdf(store, recorded["run_id"], out, keys=keys)
    return built


def _verify_json(capsys, *argv: str) -> tuple[int, dict]:
    rc = main(["verify", *argv, "--format", "json"])
    return rc, json.loads(capsys.readouterr().out)


def test_fresh_pdf_verifies_intact_valid_trusted(signed_pdf, keys, capsys):
    rc, res = _verify_json(capsys, str(signed_pdf.path), "--cert", str(keys.cert_path))
    assert rc == 0, res["problems"]
    assert res["signed"] and res["intact"] and res["valid"] and res["trusted"] and res["coverage_entire_file"]
    assert "Test Delivery Engineer" in res["signer"]
    assert res["signer_fingerprint_sha256"] == keys.fingerprint_sha256
    assert res["signing_time"]
    assert res["data_sha256"] == signed_pdf.data_sha256 == res["data_sha256_attached"]
    assert res["verdict"] == "fail" and res["run_id"] == "r-20260921-node-a01"


def test_without_cert_trust_is_not_judged_but_integrity_is(signed_pdf, capsys):
    rc, res = _verify_json(capsys, str(signed_pdf.path))
    assert rc == 0
    assert res["trusted"] is None and res["intact"] is True


def test_one_changed_byte_fails(signed_pdf, tmp_path, capsys):
    data = bytearray(signed_pdf.path.read_bytes())
    # Change one byte of the report's own page content (inside the signed byte range).
    pos = data.index(b"stream", len(data) // 10) + 40
    data[pos] = (data[pos] + 1) % 256
    bad = tmp_path / "tampered.pdf"
    bad.write_bytes(bytes(data))
    rc, res = _verify_json(capsys, str(bad))
    assert rc == 1
    assert res["intact"] is False or res["valid"] is False or not res["signed"]
    assert res["problems"]


def test_signed_by_another_key_fails_with_cert(signed_pdf, other_keys, capsys):
    rc, res = _verify_json(capsys, str(signed_pdf.path), "--cert", str(other_keys.cert_path))
    assert rc == 1
    assert res["intact"] is True and res["trusted"] is False
    assert any("untrusted" in p for p in res["problems"])


def test_unsigned_pdf_fails(recorded, tmp_path, capsys):
    out = tmp_path / "draft.pdf"
    with Store.open(recorded["db"], create=False) as store:
        build_pdf(store, recorded["run_id"], out, keys=None)
    rc, res = _verify_json(capsys, str(out))
    assert rc == 1 and res["signed"] is False
    assert res["problems"] == ["the PDF is not signed"]


def test_update_appended_after_signing_fails(signed_pdf, tmp_path, capsys):
    """Swapping the attached data in a new revision keeps the old signature intact: caught."""
    from pyhanko.pdf_utils import embed
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter

    w = IncrementalPdfFileWriter(io.BytesIO(signed_pdf.path.read_bytes()))
    ef = embed.EmbeddedFileObject.from_file_data(w, data=b"timestamp,device,metric,value\r\n", mime_type="text/csv")
    embed.embed_file(w, embed.FileSpec("soak-raw-fixed.csv", embedded_data=ef))
    buf = io.BytesIO()
    w.write(buf)
    bad = tmp_path / "appended.pdf"
    bad.write_bytes(buf.getvalue())
    rc, res = _verify_json(capsys, str(bad))
    assert rc == 1
    assert res["coverage_entire_file"] is False


def test_table_output_and_missing_file(signed_pdf, keys, capsys, tmp_path):
    assert main(["verify", str(signed_pdf.path), "--cert", str(keys.cert_path)]) == 0
    out = capsys.readouterr().out
    assert "result:         OK" in out and "attached data:  matches" in out
    assert main(["verify", str(tmp_path / "nope.pdf")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_keys_init_writes_0600_key_and_refuses_overwrite(tmp_path, capsys):
    d = tmp_path / "k"
    assert main(["keys", "init", "--dir", str(d), "--cn", "Lab Signer", "--org", "ACME", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert stat.S_IMODE(os.stat(doc["key"]).st_mode) == 0o600
    assert len(doc["fingerprint_sha256"].split(":")) == 32
    assert main(["keys", "init", "--dir", str(d)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_rsa_keys_sign_too(tmp_path, recorded, capsys):
    kp = create_keys(tmp_path / "rsa", algorithm="rsa")
    out = tmp_path / "rsa.pdf"
    with Store.open(recorded["db"], create=False) as store:
        build_pdf(store, recorded["run_id"], out, keys=kp)
    rc, res = _verify_json(capsys, str(out), "--cert", str(kp.cert_path))
    assert rc == 0, res["problems"]


def test_world_readable_key_is_refused_with_the_fix(keys, tmp_path, recorded, capsys):
    loose = tmp_path / "loose-key.pem"
    loose.write_bytes(keys.key_path.read_bytes())
    loose.chmod(0o644)
    with pytest.raises(KeyFileError, match=r"mode 0644.*chmod 600"):
        load_keypair(loose, keys.cert_path)
    rc = main(["report", "pdf", recorded["run_id"], "--db", recorded["db"], "-o", str(tmp_path / "x.pdf"),
               "--key", str(loose), "--cert", str(keys.cert_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and f"chmod 600 {loose}" in err
    assert not (tmp_path / "x.pdf").exists()
