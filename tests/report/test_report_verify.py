"""Signing and ``soak verify``: fresh passes with the signer's certificate; tampered, foreign-key,
appended, unsigned, damaged-signature and no-certificate reports fail, each with its own reason."""

from __future__ import annotations

import io
import json
import os
import stat

import pytest

from soak.cli import main
from soak.errors import KeyFileError
from soak.report.build import build_pdf
from soak.report.signing import create_keys, load_keypair
from soak.store import Store

pytestmark = pytest.mark.compute  # pyproject.toml


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


def _tampered_copy(signed_pdf, tmp_path) -> str:
    data = bytearray(signed_pdf.path.read_bytes())
    # Change one byte of the report's own page content (inside the signed byte range).
    pos = data.index(b"stream", len(data) // 10) + 40
    data[pos] = (data[pos] + 1) % 256
    bad = tmp_path / "tampered.pdf"
    bad.write_bytes(bytes(data))
    return str(bad)


def _flip_in_signature(signed_pdf, tmp_path, der_hex: bytes) -> str:
    """Flip the last hex digit of ``der_hex`` inside the signature's /Contents."""
    data = bytearray(signed_pdf.path.read_bytes())
    start = data.rindex(b"/Contents <") + len(b"/Contents <")
    pos = data.index(der_hex, start, data.index(b">", start)) + len(der_hex) - 1
    data[pos] = ord("3") if data[pos] != ord("3") else ord("4")
    bad = tmp_path / "flipped.pdf"
    bad.write_bytes(bytes(data))
    return str(bad)


@pytest.fixture
def resigned_pdf(recorded, tmp_path):
    """The same report signed by someone else's key whose certificate has the vendor's CN and O."""
    fake = create_keys(tmp_path / "fake", common_name="Test Delivery Engineer", organization="soak tests")
    out = tmp_path / "resigned.pdf"
    with Store.open(recorded["db"], create=False) as store:
        build_pdf(store, recorded["run_id"], out, keys=fake)
    return out, fake


def test_attacker_key_with_the_same_cn_is_not_trusted_without_cert(resigned_pdf, capsys):
    out, _ = resigned_pdf
    assert main(["verify", str(out)]) == 1
    text = capsys.readouterr().out
    assert "trusted:        NO (no --cert given)" in text
    assert "result:         FAILED" in text and "signer not trusted: no --cert given" in text
    rc, res = _verify_json(capsys, str(out))
    assert rc == 1 and res["ok"] is False
    assert res["intact"] is True and res["valid"] is True and res["trusted"] is False
    assert res["failures"] == ["no-trust-anchor"]


def test_attacker_key_with_the_same_cn_fails_against_the_vendor_cert(resigned_pdf, keys, capsys):
    out, fake = resigned_pdf
    rc, res = _verify_json(capsys, str(out), "--cert", str(keys.cert_path))
    assert rc == 1
    assert res["trusted"] is False and res["failures"] == ["untrusted-signer"]
    assert res["problems"] == [
        f"untrusted signer: Organization: soak tests, Common Name: Test Delivery Engineer "
        f"(SHA-256 {fake.fingerprint_sha256}) is not a --cert certificate nor issued by one"
    ]


def test_integrity_only_on_a_good_pdf_passes_and_says_the_signer_was_not_checked(signed_pdf, capsys):
    assert main(["verify", str(signed_pdf.path), "--integrity-only"]) == 0
    text = capsys.readouterr().out
    assert "trusted:        not checked (--integrity-only)" in text
    assert "result:         OK (integrity only: the signer was not checked)" in text
    rc, res = _verify_json(capsys, str(signed_pdf.path), "--integrity-only")
    assert rc == 0 and res["ok"] is True
    assert res["integrity_only"] is True and res["trusted"] is None and res["intact"] is True


def test_integrity_only_still_fails_a_tampered_pdf(signed_pdf, tmp_path, capsys):
    rc, res = _verify_json(capsys, _tampered_copy(signed_pdf, tmp_path), "--integrity-only")
    assert rc == 1 and res["failures"] == ["tampered"]


def test_integrity_only_with_cert_is_a_usage_error(signed_pdf, keys, capsys):
    assert main(["verify", str(signed_pdf.path), "--cert", str(keys.cert_path), "--integrity-only"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--integrity-only: cannot be combined with --cert" in err


def test_one_changed_byte_with_the_right_cert_is_tampering_only(signed_pdf, keys, tmp_path, capsys):
    rc, res = _verify_json(capsys, _tampered_copy(signed_pdf, tmp_path), "--cert", str(keys.cert_path))
    assert rc == 1
    assert res["intact"] is False and res["valid"] is True
    # The vendor did sign it: the signer is not what failed.
    assert res["trusted"] is True
    assert res["failures"] == ["tampered"]
    assert res["problems"] == [
        "tampered: the signed content no longer matches the digest the signer signed (changed after signing)"
    ]


@pytest.mark.parametrize(
    "der_hex",
    [
        # The OID of ContentInfo.contentType (signedData): was "'Any' object is not subscriptable".
        pytest.param(b"06092A864886F70D010702", id="content-type"),
        # The OID of the encapsulated content type (data): was an AttributeError traceback.
        pytest.param(b"06092A864886F70D010701", id="encapsulated-content-type"),
    ],
)
def test_flipped_hex_digit_in_the_signature_is_one_clear_line(signed_pdf, keys, tmp_path, capsys, der_hex):
    bad = _flip_in_signature(signed_pdf, tmp_path, der_hex)
    assert main(["verify", bad, "--cert", str(keys.cert_path)]) == 1
    text = capsys.readouterr().out
    problems = [line for line in text.splitlines() if line.startswith("  - ")]
    assert problems == ["  - signature unreadable: the signature data in the PDF is damaged and cannot be checked"]
    assert "object" not in text and "Error" not in text
    rc, res = _verify_json(capsys, bad, "--cert", str(keys.cert_path))
    assert rc == 1 and res["failures"] == ["signature-unreadable"]
    assert res["intact"] is None and res["trusted"] is None
    assert res["detail"]  # the parser's own words, for a bug report


def test_changed_signature_value_is_an_invalid_signature_not_tampering(signed_pdf, keys, tmp_path, capsys):
    from asn1crypto import cms

    data = bytearray(signed_pdf.path.read_bytes())
    start = data.rindex(b"/Contents <") + len(b"/Contents <")
    der = bytes.fromhex(data[start : data.index(b">", start)].decode())
    value = cms.ContentInfo.load(der)["content"]["signer_infos"][0]["signature"].contents
    # The middle of the ECDSA value: still parses, no longer verifies.
    pos = start + 2 * (der.index(value) + len(value) // 2)
    data[pos] = ord("3") if data[pos] != ord("3") else ord("4")
    bad = tmp_path / "badvalue.pdf"
    bad.write_bytes(bytes(data))
    rc, res = _verify_json(capsys, str(bad), "--cert", str(keys.cert_path))
    assert rc == 1
    assert res["intact"] is True and res["valid"] is False and res["trusted"] is None
    assert res["failures"] == ["signature-invalid"]


def test_cert_file_with_several_certificates_trusts_any_of_them(signed_pdf, keys, other_keys, tmp_path, capsys):
    bundle = tmp_path / "vendor-certs.pem"
    bundle.write_bytes(other_keys.cert_path.read_bytes() + keys.cert_path.read_bytes())
    rc, res = _verify_json(capsys, str(signed_pdf.path), "--cert", str(bundle))
    assert rc == 0, res["problems"]
    assert res["trusted"] is True
    assert res["trust_anchors"] == [other_keys.fingerprint_sha256, keys.fingerprint_sha256]
    rc, res = _verify_json(
        capsys, str(signed_pdf.path), "--cert", str(other_keys.cert_path), "--cert", str(keys.cert_path)
    )
    assert rc == 0 and res["trusted"] is True


def test_cert_that_is_missing_or_not_a_certificate_is_one_line(signed_pdf, tmp_path, capsys):
    assert main(["verify", str(signed_pdf.path), "--cert", str(tmp_path / "nope.pem")]) == 2
    assert capsys.readouterr().err == f"soak: error: --cert {tmp_path / 'nope.pem'}: no such file\n"
    junk = tmp_path / "junk.pem"
    junk.write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    assert main(["verify", str(signed_pdf.path), "--cert", str(junk)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--cert {junk}: no certificate in it" in err


def test_signed_by_another_key_fails_with_cert(signed_pdf, other_keys, capsys):
    rc, res = _verify_json(capsys, str(signed_pdf.path), "--cert", str(other_keys.cert_path))
    assert rc == 1
    assert res["intact"] is True and res["trusted"] is False
    assert res["failures"] == ["untrusted-signer"]


def test_unsigned_pdf_fails(recorded, tmp_path, capsys):
    out = tmp_path / "draft.pdf"
    with Store.open(recorded["db"], create=False) as store:
        build_pdf(store, recorded["run_id"], out, keys=None)
    rc, res = _verify_json(capsys, str(out))
    assert rc == 1 and res["signed"] is False
    assert res["problems"] == ["the PDF is not signed"]


def test_update_appended_after_signing_fails(signed_pdf, keys, tmp_path, capsys):
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
    rc, res = _verify_json(capsys, str(bad), "--cert", str(keys.cert_path))
    assert rc == 1
    assert res["coverage_entire_file"] is False and res["failures"] == ["appended"]


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


@pytest.mark.slow
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


# `soak keys init --dir X` where X cannot be created: one line naming it, exit 2.


def test_key_folder_under_a_file(tmp_path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    rc = main(["keys", "init", "--dir", str(blocker / "keys")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith(f"soak: error: --dir {blocker / 'keys'}: cannot create the key folder (")
    assert "\n" not in err


# ``soak verify`` on something that is not a PDF: one line naming the file, exit 2.


def test_text_file_is_bad_input_not_a_failed_report(tmp_path, capsys):
    f = tmp_path / "notes.txt"
    f.write_text("hello, this is not a report\n")
    rc = main(["verify", str(f)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.count("\n") == 0
    assert str(f) in err and "not a PDF" in err
    assert "Traceback" not in err


def test_directory_is_named_as_such(tmp_path, capsys):
    rc = main(["verify", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert "is a directory" in err and str(tmp_path) in err


def test_truncated_pdf_still_fails_verification(tmp_path, capsys):
    # A PDF header with a damaged body is a report that fails its checks (exit 1), not bad input.
    f = tmp_path / "cut.pdf"
    f.write_bytes(b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog")
    rc = main(["verify", str(f)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAILED" in out


def test_soak_verify_says_nothing_of_third_party_deprecations(signed_pdf, keys) -> None:
    # as a user runs it: a process of its own, Python's default warning filters (no pytest's)
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "PYTHONDEVMODE")}
    done = subprocess.run([sys.executable, "-m", "soak", "verify", str(signed_pdf.path), "--cert", str(keys.cert_path)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "deprecated" not in done.stderr, done.stderr
