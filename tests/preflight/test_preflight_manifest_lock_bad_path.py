"""`soak manifest lock FILE` where FILE is a folder or lies in a missing folder: one line, exit 2,
no stray temporary file."""

from __future__ import annotations

from soak.cli import main


def test_lock_into_a_missing_folder(tmp_path, capsys) -> None:
    target = tmp_path / "missing" / "cluster.lock.json"
    rc = main(["manifest", "lock", str(target)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"soak: error: {target}: cannot write the lock file (No such file or directory)"


def test_lock_onto_a_folder(tmp_path, capsys) -> None:
    rc = main(["manifest", "lock", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"soak: error: {tmp_path}: is a directory; name the lock file, e.g. {tmp_path / 'cluster.lock.json'}"
    assert list(tmp_path.iterdir()) == []
    assert not any(p.name.startswith(f".{tmp_path.name}.tmp") for p in tmp_path.parent.iterdir())
