"""The signing key: 0600 in a folder soak makes 0700; a folder others may write is refused; an
encrypted PKCS#8 key signs with its passphrase from a file or ``SOAK_KEY_PASSPHRASE``, and says
in one line what is missing or wrong. The store URL given to ``soak report serve`` stays out of
the app's argv and its Runs table."""

from __future__ import annotations

import io
import os
import stat

import pytest

from soak.cli import main
from soak.errors import KeyFileError
from soak.report.signing import CERT_FILE, KEY_FILE, PASSPHRASE_ENV, finalize_pdf, load_keypair
from tests import otheruser


def _mode(p) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def _tiny_pdf() -> bytes:
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf)
    c.drawString(72, 720, "soak")
    c.save()
    return buf.getvalue()


def test_keys_init_makes_its_folder_0700_and_the_key_0600_under_umask_022(tmp_path, capsys) -> None:
    old = os.umask(0o022)
    try:
        assert main(["keys", "init", "--dir", str(tmp_path / "runs" / "keys")]) == 0
    finally:
        os.umask(old)
    folder = tmp_path / "runs" / "keys"
    assert (_mode(folder), _mode(folder / KEY_FILE)) == (0o700, 0o600)


def test_a_key_in_a_folder_others_may_write_is_refused(tmp_path, capsys) -> None:
    folder = tmp_path / "keys"
    assert main(["keys", "init", "--dir", str(folder)]) == 0
    folder.chmod(0o777)
    with pytest.raises(KeyFileError, match=r"the key folder is writable by others \(mode 0777\); fix with: chmod 700"):
        load_keypair(folder / KEY_FILE, folder / CERT_FILE)


def test_a_key_folder_another_user_made_is_refused(capsys) -> None:
    # its owner may rename the signer's key away and put theirs in its place, whatever its mode
    otheruser.require()
    with otheruser.shared_folder() as base:
        folder = base / "open" / "keys"
        otheruser.sh(f"mkdir -m 700 {folder}")
        assert main(["keys", "init", "--dir", str(folder)]) == 2
        err = capsys.readouterr().err
        assert f"{folder}: the key folder is owned by uid {otheruser.uid()}, not by the signer (uid 0)" in err
        assert not (folder / KEY_FILE).exists()
        # a key pair made elsewhere and moved into their folder is refused when it is loaded
        ours = base / "keys"
        assert main(["keys", "init", "--dir", str(ours)]) == 0
        for name in (KEY_FILE, CERT_FILE):
            (ours / name).rename(folder / name)
        with pytest.raises(KeyFileError, match=rf"{folder}: the key folder is owned by uid {otheruser.uid()}"):
            load_keypair(folder / KEY_FILE, folder / CERT_FILE)


def test_a_key_or_certificate_another_user_owns_is_refused(tmp_path, capsys) -> None:
    otheruser.require()
    folder = tmp_path / "keys"
    assert main(["keys", "init", "--dir", str(folder)]) == 0
    key, cert = folder / KEY_FILE, folder / CERT_FILE
    load_keypair(key, cert)
    for theirs in (key, cert):
        os.chown(theirs, otheruser.uid(), -1)
        with pytest.raises(KeyFileError, match=rf"{theirs}: owned by uid {otheruser.uid()}, not by the signer"):
            load_keypair(key, cert)
        os.chown(theirs, 0, -1)
    cert.chmod(0o666)
    with pytest.raises(KeyFileError, match=rf"{cert}: writable by others \(mode 0666\)"):
        load_keypair(key, cert)


def test_an_encrypted_key_signs_with_its_passphrase_and_says_what_is_missing(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv(PASSPHRASE_ENV, raising=False)
    secret = tmp_path / "passphrase"
    secret.write_text("correct horse battery\n")
    folder = tmp_path / "keys"
    assert main(["keys", "init", "--dir", str(folder), "--passphrase-file", str(secret)]) == 0
    key, cert = folder / KEY_FILE, folder / CERT_FILE
    assert b"BEGIN ENCRYPTED PRIVATE KEY" in key.read_bytes()  # PKCS#8, encrypted
    with pytest.raises(KeyFileError, match=rf"{key}: the key is encrypted: give its passphrase with "
                                           rf"--key-passphrase-file FILE or {PASSPHRASE_ENV}$"):
        finalize_pdf(_tiny_pdf(), keys=load_keypair(key, cert))
    with pytest.raises(KeyFileError, match=r"cannot load the key \(wrong passphrase\)$"):
        finalize_pdf(_tiny_pdf(), keys=load_keypair(key, cert, b"wrong"))
    signed = finalize_pdf(_tiny_pdf(), keys=load_keypair(key, cert, b"correct horse battery"))
    assert b"/ByteRange" in signed
    monkeypatch.setenv(PASSPHRASE_ENV, "correct horse battery")  # the app's way: no argument
    assert b"/ByteRange" in finalize_pdf(_tiny_pdf(), keys=load_keypair(key, cert))


def test_report_serve_keeps_the_store_url_out_of_the_apps_argv(capsys) -> None:
    from soak.commands.report import app_environ
    from soak.report import APP_DB_ENV

    url = "postgresql+psycopg://soak:S3cretPW@db/soak"
    assert main(["report", "serve", "--dry-run", "--db", url]) == 0
    assert "S3cretPW" not in capsys.readouterr().out
    assert app_environ(url)[APP_DB_ENV] == url


def test_the_apps_runs_table_names_a_store_it_cannot_open_masked(monkeypatch) -> None:
    from streamlit.testing.v1 import AppTest

    from tests.report.test_report_app import APP

    monkeypatch.setenv("SOAK_REPORT_DB", "postgresql+psycopg://soak:S3cretPW@db:port/soak")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, at.exception
    shown = at.dataframe[0].value.to_string()
    assert "soak:***@db:port/soak" in shown and "S3cretPW" not in shown, shown


def test_no_key_is_made_or_used_inside_a_run_folder(tmp_path, capsys) -> None:
    from soak.daemon.runfolder import make_run_dir

    run_dir = make_run_dir(tmp_path / "runs", "r1", exist_ok=False)
    assert main(["keys", "init", "--dir", str(run_dir / "report" / "keys")]) == 2
    err = capsys.readouterr().err
    assert err == (f"soak: error: {run_dir / 'report' / 'keys' / KEY_FILE}: inside the run folder {run_dir}, which "
                   "travels with the run's data; keep keys in their own folder (soak keys init's default) or elsewhere\n")
    assert not (run_dir / "report" / "keys").exists()
    assert main(["keys", "init", "--dir", str(tmp_path / "runs" / "keys")]) == 0  # beside the runs
    moved = run_dir / KEY_FILE
    (tmp_path / "runs" / "keys" / KEY_FILE).rename(moved)
    with pytest.raises(KeyFileError, match="inside the run folder"):
        load_keypair(moved, tmp_path / "runs" / "keys" / CERT_FILE)


def test_the_default_key_folder_is_the_users_own_outside_the_data_dir(tmp_path, monkeypatch, capsys) -> None:
    from soak.report.signing import create_keys, default_keypair
    from soak.runfolder import KEYS_DIR_ENV, keys_dir

    monkeypatch.delenv(KEYS_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert keys_dir() == tmp_path / "config" / "soak" / "keys"
    monkeypatch.setenv(KEYS_DIR_ENV, str(tmp_path / "own"))
    data = tmp_path / "runs"
    data.mkdir()
    assert default_keypair(data) is None
    # a key an earlier release made beside the runs still signs, until the user has their own
    create_keys(data / "keys", common_name="old place")
    assert default_keypair(data).key_path == data / "keys" / KEY_FILE
    assert main(["keys", "init", "--cn", "own place", "--format", "json"]) == 0
    made = tmp_path / "own" / KEY_FILE
    assert capsys.readouterr().out.count(str(made)) == 1
    assert (_mode(tmp_path / "own"), _mode(made)) == (0o700, 0o600)
    assert default_keypair(data).key_path == made and not (data / "keys" / "own place").exists()


def test_a_working_folder_that_holds_a_plan_toml_is_no_run_folder_for_a_key(tmp_path) -> None:
    # the README's way: a plan.toml in the folder one works in, keys made beside it
    (tmp_path / "plan.toml").write_text("[run]\nduration = \"1h\"\n", encoding="utf-8")
    assert main(["keys", "init", "--dir", str(tmp_path / "keys")]) == 0
    load_keypair(tmp_path / "keys" / KEY_FILE, tmp_path / "keys" / CERT_FILE)
