"""`soak sim install DIR` where DIR cannot be created: one line naming it, exit 2."""

from __future__ import annotations

from soak.cli import main


def test_install_under_a_file(tmp_path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    rc = main(["sim", "install", str(blocker / "fleet")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith(f"soak: error: {blocker / 'fleet'}: cannot create the folder (")
    assert "\n" not in err
