"""``soak verify`` on something that is not a PDF: one line naming the file, exit 2."""

from __future__ import annotations

from soak.cli import main


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
