"""`soak dashboards push` against a fake Grafana: idempotence, folders, dry run, secrecy; and the
URL checks of push and verify."""

from __future__ import annotations

import json
import logging

import pytest

from soak import dashboards as d
from soak.cli import main
from soak.errors import mask_url

TOKEN = "glsa_s3cr3t-T0ken-value-4f9a"


def _push(capsys, url, *extra):
    rc = main(["dashboards", "push", "--grafana-url", url, "--format", "json", *extra])
    out, err = capsys.readouterr()
    return rc, out, err


def test_first_push_creates_second_updates_without_duplicates(fake_grafana, capsys, monkeypatch,
                                                              caplog):
    url, state = fake_grafana
    state.token = TOKEN
    monkeypatch.setenv(d.TOKEN_ENV, TOKEN)
    caplog.set_level(logging.DEBUG)

    rc, out, err = _push(capsys, url, "--folder", "Soak tests")
    assert rc == 0, err
    first = json.loads(out)["steps"]
    assert [(s["kind"], s["action"]) for s in first] == [
        ("datasource", "created"), ("folder", "created"),
        ("dashboard", "created"), ("dashboard", "created"), ("dashboard", "created"), ("dashboard", "created")]
    assert sorted(state.dashboards) == ["soak-chip-detail", "soak-cluster", "soak-fleet-overview", "soak-run"]
    assert state.datasources["soak-prometheus"]["url"] == "http://prometheus:9090"
    assert state.datasources["soak-prometheus"]["type"] == "prometheus"
    assert {b["folderUid"] for b in state.dashboards.values()} == {"soak-soak-tests"}
    ids = {uid: b["dashboard"]["id"] for uid, b in state.dashboards.items()}

    rc, out2, err2 = _push(capsys, url, "--folder", "Soak tests")
    assert rc == 0, err2
    second = json.loads(out2)["steps"]
    assert [(s["kind"], s["action"]) for s in second] == [
        ("datasource", "kept"), ("folder", "kept"),
        ("dashboard", "updated"), ("dashboard", "updated"), ("dashboard", "updated"), ("dashboard", "updated")]
    assert len(state.datasources) == 1 and len(state.folders) == 1 and len(state.dashboards) == 4
    assert {uid: b["dashboard"]["id"] for uid, b in state.dashboards.items()} == ids
    assert all(b["dashboard"]["version"] == 2 for b in state.dashboards.values())

    # the token went to Grafana on every request, and nowhere else
    assert state.requests and all(auth == f"Bearer {TOKEN}" for _, _, auth in state.requests)
    for text in (out, err, out2, err2, caplog.text):
        assert TOKEN not in text


def test_token_from_file_and_table_output(fake_grafana, capsys, tmp_path, monkeypatch):
    url, state = fake_grafana
    state.token = TOKEN
    monkeypatch.delenv(d.TOKEN_ENV, raising=False)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    rc = main(["dashboards", "push", "--grafana-url", url, "--token-file", str(token_file),
               "--datasource-url", "http://prom.example:9090"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "created       dashboard  soak-fleet-overview      soak / Fleet overview" in out
    assert state.datasources["soak-prometheus"]["url"] == "http://prom.example:9090"
    assert TOKEN not in out + err


def test_dry_run_writes_nothing(fake_grafana, capsys, monkeypatch):
    url, state = fake_grafana
    monkeypatch.delenv(d.TOKEN_ENV, raising=False)
    rc, out, err = _push(capsys, url, "--dry-run", "--folder", "Soak")
    assert rc == 0, err
    steps = json.loads(out)["steps"]
    assert {s["action"] for s in steps} == {"would create"}
    assert not state.datasources and not state.folders and not state.dashboards
    assert all(method == "GET" for method, _, _ in state.requests)


def test_existing_folder_found_by_title_is_reused(fake_grafana, capsys, monkeypatch):
    url, state = fake_grafana
    monkeypatch.delenv(d.TOKEN_ENV, raising=False)
    state.folders["abc123"] = {"id": 7, "uid": "abc123", "title": "Acceptance"}
    rc, out, err = _push(capsys, url, "--folder", "Acceptance")
    assert rc == 0, err
    assert json.loads(out)["steps"][1] == {"kind": "folder", "uid": "abc123",
                                           "title": "Acceptance", "action": "kept"}
    assert {b["folderUid"] for b in state.dashboards.values()} == {"abc123"}


def test_wrong_token_is_one_line_without_the_token(fake_grafana, capsys, monkeypatch):
    url, state = fake_grafana
    state.token = "the-right-one"
    monkeypatch.setenv(d.TOKEN_ENV, TOKEN)
    rc, out, err = _push(capsys, url)
    assert rc == 2
    assert err.count("\n") == 1 and "soak: error: --grafana-url" in err
    assert "401" in err and TOKEN not in err + out


def test_unreachable_grafana_and_bad_token_file(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv(d.TOKEN_ENV, raising=False)
    rc = main(["dashboards", "push", "--grafana-url", "http://admin:pw@127.0.0.1:9",
               "--timeout", "2"])
    err = capsys.readouterr().err
    assert rc == 2 and "http://admin:***@127.0.0.1:9" in err and "pw" not in err
    rc = main(["dashboards", "push", "--grafana-url", "http://127.0.0.1:9",
               "--token-file", str(tmp_path / "missing")])
    err = capsys.readouterr().err
    assert rc == 2 and "--token-file" in err and "no such file" in err
    rc = main(["dashboards", "push", "--grafana-url", "grafana:3000"])
    assert rc == 2 and "not an http(s) URL" in capsys.readouterr().err


def test_push_dir_without_dashboards_is_a_user_error(tmp_path, capsys):
    rc = main(["dashboards", "push", "--grafana-url", "http://127.0.0.1:9", "--dir",
               str(tmp_path)])
    assert rc == 2 and "no fleet-overview.json" in capsys.readouterr().err


@pytest.mark.parametrize("url,shown", [
    ("http://admin:secret@g:3000/sub", "http://admin:***@g:3000/sub"),
    ("https://g.example", "https://g.example"),
])
def test_mask_url(url, shown):
    assert mask_url(url) == shown


# `soak dashboards verify --prometheus-url` without a scheme: one line, exit 2 (was a
# ValueError traceback from urllib).


@pytest.mark.parametrize("url", ["notaurl", "127.0.0.1:9090", "ftp://prom:9090"])
def test_url_without_http_scheme(url, capsys) -> None:
    rc = main(["dashboards", "verify", "--prometheus-url", url])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"soak: error: --prometheus-url {url}: not an http(s) URL, e.g. http://127.0.0.1:9090"


def test_server_echoing_the_request_headers_in_its_error_body_does_not_print_the_token(
        fake_grafana, capsys, monkeypatch, caplog):
    url, state = fake_grafana
    state.token, state.echo_headers = TOKEN, True
    monkeypatch.setenv(d.TOKEN_ENV, TOKEN)
    caplog.set_level(logging.DEBUG)
    rc, out, err = _push(capsys, url)
    assert rc == 2
    # the body is still shown (it says what Grafana disliked), with the credentials cut out
    assert err.startswith(f"soak: error: --grafana-url {url}: Grafana rejected a request (400: ")
    assert "bad request POST /api/datasources" in err
    assert "'Authorization': '[redacted]'" in err and err.count("\n") == 1
    for text in (out, err, caplog.text):
        assert TOKEN not in text and "glsa_" not in text


def test_log_lines_carrying_the_token_are_redacted_while_pushing(caplog):
    caplog.set_level(logging.DEBUG)
    with d.redacting_logs(TOKEN):
        logging.getLogger("urllib3.connectionpool").debug("send: headers %s", {"Authorization": f"Bearer {TOKEN}"})
        logging.getLogger("grafana_client").warning("token %s rejected", TOKEN)
    assert TOKEN not in caplog.text and caplog.text.count("[redacted]") == 2
