"""`soak keys init --dir X` where X cannot be created: one line naming it, exit 2."""

from __future__ import annotations

from soak.cli import main


def test_key_folder_under_a_file(tmp_path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    rc = main(["keys", "init", "--dir", str(blocker / "keys")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith(f"soak: error: --dir {blocker / 'keys'}: cannot create the key folder (")
    assert "\n" not in err
