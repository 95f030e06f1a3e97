"""Fixtures for the dashboards area: a small fake Grafana HTTP API on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "dashboards"
DEPLOY = REPO / "deploy"


@dataclass
class FakeGrafanaState:
    """What the fake Grafana holds, and every request it saw."""

    token: str | None = None  # when set, requests without "Bearer <token>" get 401
    datasources: dict[str, dict[str, Any]] = field(default_factory=dict)
    folders: dict[str, dict[str, Any]] = field(default_factory=dict)
    dashboards: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, auth
    echo_headers: bool = False  # answer writes with 400 and the request's headers in the body
    next_id: int = 1


class _Handler(BaseHTTPRequestHandler):
    state: FakeGrafanaState  # set on the subclass made per server

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _send(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n)) if n else None

    def _authorized(self) -> bool:
        auth = self.headers.get("Authorization")
        self.state.requests.append((self.command, self.path, auth))
        return self.state.token is None or auth == f"Bearer {self.state.token}"

    def do_GET(self) -> None:
        if not self._authorized():
            return self._send(401, {"message": "invalid API key"})
        st, path = self.state, self.path.split("?")[0]
        if path == "/api/health":
            return self._send(200, {"database": "ok", "version": "11.3.0", "commit": "fake"})
        if path == "/api/frontend/settings":  # what grafana-client's health.check() reads
            return self._send(200, {"buildInfo": {"version": "11.3.0", "commit": "fake"}})
        if path.startswith("/api/datasources/uid/"):
            ds = st.datasources.get(path.rsplit("/", 1)[1])
            return self._send(200, ds) if ds else self._send(404, {"message": "Data source not found"})
        if path == "/api/folders":
            return self._send(200, list(st.folders.values()))
        if path.startswith("/api/dashboards/uid/"):
            db = st.dashboards.get(path.rsplit("/", 1)[1])
            if not db:
                return self._send(404, {"message": "Dashboard not found"})
            return self._send(200, {"dashboard": db["dashboard"],
                                    "meta": {"folderUid": db.get("folderUid", "")}})
        return self._send(404, {"message": "not found"})

    def do_POST(self) -> None:
        if not self._authorized():
            return self._send(401, {"message": "invalid API key"})
        st, body = self.state, self._body()
        if st.echo_headers:  # as some proxies and debug builds do
            return self._send(400, {"message": f"bad request {self.command} {self.path}; "
                                               f"headers: {dict(self.headers)}"})
        if self.path == "/api/datasources":
            if body["uid"] in st.datasources or any(d["name"] == body["name"]
                                                    for d in st.datasources.values()):
                return self._send(409, {"message": "data source with the same name already exists"})
            ds = dict(body, id=st.next_id)
            st.next_id += 1
            st.datasources[body["uid"]] = ds
            return self._send(200, {"datasource": ds, "id": ds["id"], "message": "Datasource added",
                                    "name": ds["name"]})
        if self.path == "/api/folders":
            uid = body.get("uid") or f"f{st.next_id}"
            folder = {"id": st.next_id, "uid": uid, "title": body["title"]}
            st.next_id += 1
            st.folders[uid] = folder
            return self._send(200, folder)
        if self.path == "/api/dashboards/db":
            board = body["dashboard"]
            uid = board["uid"]
            old = st.dashboards.get(uid)
            if old and not body.get("overwrite"):
                return self._send(412, {"message": "A dashboard with the same uid already exists",
                                        "status": "name-exists"})
            if body.get("folderUid") and body["folderUid"] not in st.folders:
                return self._send(400, {"message": "folder not found"})
            version = (old["dashboard"]["version"] + 1) if old else 1
            stored = dict(board, id=old["dashboard"]["id"] if old else st.next_id, version=version)
            st.next_id += 0 if old else 1
            st.dashboards[uid] = {"dashboard": stored, "folderUid": body.get("folderUid", "")}
            return self._send(200, {"id": stored["id"], "uid": uid, "status": "success",
                                    "version": version, "url": f"/d/{uid}"})
        return self._send(404, {"message": "not found"})


@pytest.fixture
def fake_grafana() -> Iterator[tuple[str, FakeGrafanaState]]:
    """(base URL, state) of a fake Grafana; stopped after the test."""
    state = FakeGrafanaState()
    handler = type("Handler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
