"""`soak demo` with an unusable --data-dir or --port: one line, exit 2, before the soak starts."""

from __future__ import annotations

from soak.cli import main


def test_data_dir_that_cannot_be_created(tmp_path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    rc = main(["demo", "--data-dir", str(blocker / "runs")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith(f"soak: error: --data-dir {blocker / 'runs'}: cannot create it (")
    assert "\n" not in err


def test_port_zero(tmp_path, capsys) -> None:
    rc = main(["demo", "--port", "0", "--data-dir", str(tmp_path)])
    assert rc == 2
    assert capsys.readouterr().err.strip() == "soak: error: --port 0: must be 1-65535"
    assert list(tmp_path.iterdir()) == []
