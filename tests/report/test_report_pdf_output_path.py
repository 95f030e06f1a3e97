"""`soak report pdf -o PATH` where PATH is a folder, or lies under a file: one line, exit 2,
and no stray temporary file."""

from __future__ import annotations

from soak.cli import main


def _pdf(recorded, out) -> list[str]:
    return ["report", "pdf", recorded["run_id"], "-o", str(out), "--data-dir", str(recorded["data_dir"]),
            "--unsigned"]


def test_output_that_is_a_directory(recorded, tmp_path, capsys) -> None:
    rc = main(_pdf(recorded, tmp_path))
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"soak: error: -o {tmp_path}: is a directory; name the PDF file, e.g. {tmp_path / 'acceptance.pdf'}"
    assert list(tmp_path.iterdir()) == []
    assert not (tmp_path.parent / f".{tmp_path.name}.tmp").exists()


def test_output_under_a_regular_file(recorded, tmp_path, capsys) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("x")
    rc = main(_pdf(recorded, blocker / "report.pdf"))
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith(f"soak: error: -o {blocker / 'report.pdf'}: cannot create its folder {blocker}")
    assert "\n" not in err
