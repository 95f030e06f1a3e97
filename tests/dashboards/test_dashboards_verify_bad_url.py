"""`soak dashboards verify --prometheus-url` without a scheme: one line, exit 2 (was a
ValueError traceback from urllib)."""

from __future__ import annotations

import pytest

from soak.cli import main


@pytest.mark.parametrize("url", ["notaurl", "127.0.0.1:9090", "ftp://prom:9090"])
def test_url_without_http_scheme(url, capsys) -> None:
    rc = main(["dashboards", "verify", "--prometheus-url", url])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"soak: error: --prometheus-url {url}: not an http(s) URL, e.g. http://127.0.0.1:9090"
