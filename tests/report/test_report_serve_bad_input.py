"""`soak report serve` with a missing --data-dir, a busy port or an address not on this host:
one line, exit 2, before Streamlit starts."""

from __future__ import annotations

import socket

from soak.cli import main


def test_missing_data_dir(tmp_path, capsys) -> None:
    missing = tmp_path / "no-runs-here"
    rc = main(["report", "serve", "--data-dir", str(missing), "--port", "8511"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith(f"soak: error: --data-dir {missing}: no such folder")
    assert "\n" not in err


def test_busy_port(tmp_path, capsys) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        rc = main(["report", "serve", "--data-dir", str(tmp_path), "--port", str(port)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"soak: error: --address 127.0.0.1 --port {port}: cannot listen (Address already in use)"


def test_address_not_on_this_host(tmp_path, capsys) -> None:
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): never assigned to a local interface; bind fails locally.
    rc = main(["report", "serve", "--data-dir", str(tmp_path), "--address", "192.0.2.1", "--port", "8512"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith("soak: error: --address 192.0.2.1 --port 8512: cannot listen (")
