"""Grafana dashboards and Prometheus alert rules: load, lint, verify against a live Prometheus,
and push to Grafana.

The dashboards are classic Grafana JSON kept in the repository's ``dashboards/`` folder (written
by ``dashboards/generate.py``); every panel names its datasource as ``${datasource}``, a
variable of type datasource, and the datasource soak provisions has the fixed uid
``soak-prometheus``. ``push`` creates that datasource when missing and writes each dashboard
with ``overwrite=True`` under its own uid, so pushing twice updates and never duplicates.

Command line equivalent of ``push``: ``curl -H "Authorization: Bearer $TOKEN"
-X POST $GRAFANA/api/dashboards/db -d '{"dashboard": ..., "overwrite": true}'``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from exporters import collector
from soak.daemon import metrics as run_metrics
from soak.errors import InputError, mask_url, redact

DATASOURCE_UID = "soak-prometheus"
DATASOURCE_NAME = "soak Prometheus"
TOKEN_ENV = "SOAK_GRAFANA_TOKEN"
DASHBOARD_FILES = ("fleet-overview.json", "chip-detail.json", "soak-run.json", "cluster.json")
ALERTS_FILE = "alerts.yaml"

# Every metric soak serves, as its collectors declare them, plus what Prometheus adds to every
# target. A dashboard or rule naming anything else shows an empty panel forever.
DEVICE_METRICS = collector.METRIC_NAMES
RUN_METRICS = run_metrics.METRIC_NAMES
PROMETHEUS_METRICS = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped"})
CLUSTER_METRICS = run_metrics.CLUSTER_ONLY  # a single node never serves these
KNOWN_METRICS = DEVICE_METRICS | RUN_METRICS | PROMETHEUS_METRICS
# Served only while a chip reports a fault: its fault codes now, and the run's device_fault
# findings (soak.analysis.device_faults). A healthy fleet serves neither.
FAULT_ONLY_METRICS = frozenset({"soak_device_fault_code"})
# The finding kinds only a fault produces: a chip's own fault report, and a chip computing wrong
# numbers (a healthy fleet has none of either, so a query of only these is empty there).
FAULT_ONLY_KINDS = frozenset({"device_fault", "sdc", "nonfinite", "loss_spike"})
_KIND_MATCHER = re.compile(r'\bkind\s*=(~?)\s*"([^"]*)"')

# What Grafana would put in place of each template variable, for running a panel's query
# outside Grafana: every node, chip and run; a rate window that spans a few scrapes.
DEFAULT_VARIABLES: Mapping[str, str] = {
    "node": ".*", "chip": ".*", "run": ".*",
    "__rate_interval": "1m", "__interval": "15s", "__range": "5m",
}


# --- loading --------------------------------------------------------------------------------


def default_dir() -> Path:
    """The repository's dashboards/ folder (source checkout or editable install)."""
    return Path(__file__).resolve().parent.parent / "dashboards"


def resolve_dir(directory: str | Path | None) -> Path:
    path = Path(directory) if directory else default_dir()
    if not (path / DASHBOARD_FILES[0]).is_file():
        raise InputError(f"--dir {path}: no {DASHBOARD_FILES[0]} there; pass the folder that "
                         "holds soak's dashboards (dashboards/ in the source tree)")
    return path


def load_dashboards(directory: Path) -> list[dict[str, Any]]:
    """The dashboards of ``directory`` in a fixed order; a broken file is an InputError."""
    out = []
    for name in DASHBOARD_FILES:
        path = directory / name
        try:
            board = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"{path}: missing") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{path}: not readable as JSON ({exc})") from None
        if not isinstance(board, dict) or not board.get("uid") or not board.get("title"):
            raise InputError(f"{path}: not a Grafana dashboard (no uid or title)")
        out.append(board)
    return out


def _rules(path: Path, kind: str) -> list[dict[str, Any]]:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: not readable as YAML ({exc})") from None
    rules = []
    for group in (doc or {}).get("groups", []):
        rules.extend(r for r in group.get("rules", []) if kind in r)
    return rules


def load_alert_rules(path: Path) -> list[dict[str, Any]]:
    """The alerting rules of a Prometheus rule file, flattened over its groups."""
    return _rules(path, "alert")


def load_recording_rules(path: Path) -> list[dict[str, Any]]:
    """The recording rules of a Prometheus rule file (``record``, ``expr``), over its groups."""
    return _rules(path, "record")


def recorded_names(directory: Path) -> frozenset[str]:
    """The series the rule file of ``directory`` records: a panel or alert may read them."""
    path = directory / ALERTS_FILE
    return frozenset(r["record"] for r in load_recording_rules(path)) if path.is_file() else frozenset()


def panels_of(board: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every panel, including those nested in collapsed rows; row headers excluded."""
    out: list[dict[str, Any]] = []
    for panel in board.get("panels", []):
        if panel.get("type") == "row":
            out.extend(panel.get("panels", []))
        else:
            out.append(panel)
    return out


@dataclass(frozen=True)
class Query:
    """One PromQL expression and where it comes from (for messages)."""

    where: str  # e.g. "soak-fleet-overview / Temperature / A" or "alert SoakChipHang"
    expr: str


def queries_of(board: Mapping[str, Any]) -> list[Query]:
    """Every panel's queries, and every Prometheus annotation's."""
    out = []
    for panel in panels_of(board):
        for tgt in panel.get("targets", []):
            if tgt.get("expr"):
                out.append(Query(f"{board['uid']} / {panel.get('title')} / {tgt.get('refId')}",
                                 tgt["expr"]))
    for ann in board.get("annotations", {}).get("list", []):
        if ann.get("expr"):
            out.append(Query(f"{board['uid']} / annotation {ann.get('name')}", ann["expr"]))
    return out


_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(.*?)\s*,\s*[a-zA-Z_]\w*\s*\)\s*$", re.S)


def variable_queries_of(board: Mapping[str, Any]) -> list[Query]:
    """The series selector of each ``label_values(selector, label)`` variable."""
    out = []
    for var in board.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        q = var.get("query")
        text = q.get("query") if isinstance(q, dict) else q
        m = _LABEL_VALUES.match(text or "")
        if m:
            out.append(Query(f"{board['uid']} / variable {var['name']}", m.group(1)))
    return out


# --- PromQL text helpers --------------------------------------------------------------------

_KEYWORDS = frozenset({
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
    "unless", "offset", "atan2", "inf", "nan", "start", "end",
})
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w:.$])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()")


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression reads (``__name__`` of its vector selectors).

    Strings, label matchers, ranges/durations, grouping label lists and function names are
    removed first, so what is left as a bare identifier is a metric name.
    """
    text = _STRING.sub('""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = _GROUPING.sub(" ", text)
    text = re.sub(r"\$\{?\w+\}?", " ", text)
    text = re.sub(r"\b\d[\w.]*", " ", text)  # numbers, durations (5m), exponents (1e9)
    return {m for m in _IDENT.findall(text) if m not in _KEYWORDS}


_COMPARISON = re.compile(r"(==|!=|>=|<=|>|<)(?!\s*bool\b)")


def substitute(expr: str, variables: Mapping[str, str] | None = None) -> str:
    """Replace Grafana template variables (``$node``, ``${node}``, ``[[node]]``)."""
    values = dict(DEFAULT_VARIABLES)
    values.update(variables or {})

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        return values.get(name, m.group(0))

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]", repl, expr)


def probe_expr(expr: str) -> str:
    """The expression with every comparison turned into a ``bool`` comparison.

    An alert such as ``soak_device_healthy == 0`` returns nothing while all is well, which
    says nothing about whether its metric and label matching work. With ``== bool 0`` the same
    expression returns one 0/1 series per input series, so "no series" again means a wrong
    metric name, a label that does not exist, or an ``on(...)`` join that never matches.
    Comparisons inside label matchers and strings are left alone.
    """
    out = []
    pos = 0
    for m in re.finditer(r'\{[^}]*\}|"(?:[^"\\]|\\.)*"', expr):
        out.append(_COMPARISON.sub(r"\1 bool", expr[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_COMPARISON.sub(r"\1 bool", expr[pos:]))
    return "".join(out)


# --- lint -----------------------------------------------------------------------------------


def lint(directory: Path, known: Iterable[str] = KNOWN_METRICS) -> list[str]:
    """Problems found in the dashboards and alert rules of ``directory`` (empty: all good)."""
    known = frozenset(known) | recorded_names(directory)
    problems: list[str] = []
    boards = load_dashboards(directory)
    uids: set[str] = set()
    for board in boards:
        uid = board["uid"]
        if uid in uids:
            problems.append(f"{uid}: dashboard uid used twice")
        uids.add(uid)
        if "__inputs" in board:
            problems.append(f"{uid}: has __inputs (breaks file provisioning)")
        names = [v.get("name") for v in board.get("templating", {}).get("list", [])]
        if "datasource" not in names:
            problems.append(f"{uid}: no 'datasource' template variable")
        ids = [p.get("id") for p in board.get("panels", [])]
        if len(ids) != len(set(ids)):
            problems.append(f"{uid}: panel ids are not unique")
        for panel in panels_of(board):
            title = panel.get("title")
            if not panel.get("targets"):
                problems.append(f"{uid} / {title}: panel has no query")
            refs = [panel.get("datasource")]
            refs += [t.get("datasource") for t in panel.get("targets", [])]
            if any(r != {"type": "prometheus", "uid": "${datasource}"} for r in refs):
                problems.append(f"{uid} / {title}: datasource is not ${{datasource}}")
        for q in queries_of(board) + variable_queries_of(board):
            for name in sorted(metric_names(q.expr) - known):
                problems.append(f"{q.where}: unknown metric {name}")
    rules_path = directory / ALERTS_FILE
    if rules_path.is_file():
        for rule in load_recording_rules(rules_path):
            for name_ in sorted(metric_names(rule["expr"]) - known):
                problems.append(f"record {rule['record']}: unknown metric {name_}")
        for rule in load_alert_rules(rules_path):
            name = rule["alert"]
            for name_ in sorted(metric_names(rule["expr"]) - known):
                problems.append(f"alert {name}: unknown metric {name_}")
            if "for" not in rule:
                problems.append(f"alert {name}: no 'for:'")
            if not _severity_ok(rule.get("labels", {}).get("severity")):
                problems.append(f"alert {name}: severity must be critical or warning")
            ann = rule.get("annotations", {})
            for key in ("summary", "description", "runbook_url"):
                if not ann.get(key):
                    problems.append(f"alert {name}: no {key} annotation")
    return problems


def _severity_ok(severity: Any) -> bool:
    """``critical`` or ``warning``, or a template that can only say one of them (a
    finding's alert takes its severity from the finding's)."""
    if not isinstance(severity, str):
        return False
    words = re.sub(r"\{\{.*?\}\}", " ", severity).split()
    return bool(words) and set(words) <= {"critical", "warning"} and ("{{" in severity or len(words) == 1)


# --- verify against a live Prometheus -------------------------------------------------------


@dataclass(frozen=True)
class QueryResult:
    """What a live Prometheus said about one query.

    ``series`` counts what the probe expression (variables substituted, comparisons made
    ``bool``) returned; -1 when Prometheus rejected it (``error``). ``empty_selectors`` are the
    vector selectors of the query (metric plus label matchers) that match no series on their
    own. A query that looks back further than a fresh Prometheus holds (``offset``, a
    subquery) may return nothing as a whole; its selectors must still match.
    """

    where: str
    expr: str
    series: int
    error: str | None = None
    empty_selectors: tuple[str, ...] = ()
    needs_history: bool = False
    cluster_only: bool = False  # empty for want of what only a cluster run serves: not failed
    fault_only: bool = False  # empty for want of what only a chip's fault serves: not failed

    @property
    def ok(self) -> bool:
        if self.series < 0:
            return False
        if self.cluster_only or self.fault_only:
            return True
        if self.empty_selectors:
            return False
        return self.series > 0 or self.needs_history


_SELECTOR = re.compile(r"(?<![\w:.$\"])([a-zA-Z_:][\w:]*)(?![\w:])\s*(\{[^}]*\})?(?!\s*\()")
_HISTORY = re.compile(r"\boffset\b|\[[^\]]*:[^\]]*\]")


def selectors(expr: str) -> list[str]:
    """The vector selectors of ``expr`` as text, e.g. ``soak_device_up{instance=~".*"}``."""
    names = metric_names(expr)
    seen: list[str] = []
    for m in _SELECTOR.finditer(expr):
        if m.group(1) in names:
            text = m.group(1) + (m.group(2) or "")
            if text not in seen:
                seen.append(text)
    return seen


def fault_only(selector: str) -> bool:
    """Whether ``selector`` can match only while a chip reports a fault: its fault codes, or
    findings of kinds only a fault produces (``soak_finding_active{kind="device_fault", ...}``,
    a chip computing wrong numbers: ``FAULT_ONLY_KINDS``)."""
    names = metric_names(selector)
    if names & FAULT_ONLY_METRICS:
        return True
    if "soak_finding_active" not in names:
        return False
    m = _KIND_MATCHER.search(selector)
    if m is None:
        return False
    kinds = set(m.group(2).split("|")) if m.group(1) else {m.group(2)}
    return kinds <= FAULT_ONLY_KINDS


def all_queries(directory: Path) -> list[Query]:
    queries: list[Query] = []
    for board in load_dashboards(directory):
        queries += queries_of(board) + variable_queries_of(board)
    rules_path = directory / ALERTS_FILE
    if rules_path.is_file():
        queries += [Query(f"record {r['record']}", r["expr"]) for r in load_recording_rules(rules_path)]
        queries += [Query(f"alert {r['alert']}", r["expr"]) for r in load_alert_rules(rules_path)]
    return queries


def prometheus_query(base_url: str, expr: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """One instant query through Prometheus' HTTP API; returns the decoded JSON answer."""
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--prometheus-url {mask_url(base_url)}: not an http(s) URL, e.g. http://127.0.0.1:9090")
    url = base_url.rstrip("/") + "/api/v1/query"
    data = urllib.parse.urlencode({"query": expr}).encode()
    try:
        # the operator's --prometheus-url, checked to be http(s) above
        with urllib.request.urlopen(url, data=data, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:  # 400/422: the body says what is wrong with expr
        try:
            return json.loads(exc.read())
        except ValueError:
            return {"status": "error", "error": f"HTTP {exc.code}"}
    except (urllib.error.URLError, OSError) as exc:
        raise InputError(f"--prometheus-url {base_url}: cannot query ({exc})") from None


def _count(answer: Mapping[str, Any]) -> int:
    if answer.get("status") != "success":
        return -1
    result = answer["data"]["result"]
    return len(result) if isinstance(result, list) else 1


def cluster_names(directory: Path) -> frozenset[str]:
    """What only a cluster run serves: its metrics, and the series recorded from them."""
    names = set(CLUSTER_METRICS)
    path = directory / ALERTS_FILE
    for rule in load_recording_rules(path) if path.is_file() else []:
        if metric_names(rule["expr"]) & names:
            names.add(rule["record"])
    return frozenset(names)


def verify(directory: Path, prometheus_url: str, variables: Mapping[str, str] | None = None, *,
           cluster: bool = False) -> list[QueryResult]:
    """Run every panel, variable and alert query against Prometheus and count the series.

    Without ``cluster`` a query that is empty only for want of what a cluster run alone
    serves (links, clock offsets, nodes by status) is ``cluster_only``, not failed: a single
    node's Prometheus cannot hold it. One empty only for want of a chip's fault (its fault
    codes, a device_fault finding) is ``fault_only``, not failed: a healthy fleet has none."""
    only = frozenset() if cluster else cluster_names(directory)
    results = []
    for q in all_queries(directory):
        plain = substitute(q.expr, variables)
        expr = probe_expr(plain)
        answer = prometheus_query(prometheus_url, expr)
        n = _count(answer)
        empty = tuple(sel for sel in selectors(plain)
                      if _count(prometheus_query(prometheus_url, sel)) <= 0)
        missing = set().union(*(metric_names(sel) for sel in empty)) if empty else set()
        results.append(QueryResult(q.where, expr, n, None if n >= 0 else str(answer.get("error")),
                                   empty, bool(_HISTORY.search(plain)), bool(missing) and missing <= only,
                                   bool(empty) and all(fault_only(sel) for sel in empty)))
    return results


# --- push to Grafana ------------------------------------------------------------------------


@dataclass(frozen=True)
class PushStep:
    kind: str  # "datasource" | "folder" | "dashboard"
    uid: str
    title: str
    action: str  # "created" | "updated" | "kept" | "would create" | "would update"


def read_token(token_file: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The Grafana API token from --token-file, else $SOAK_GRAFANA_TOKEN, else None."""
    if token_file:
        from soak.tomlfile import read_regular_text

        token = read_regular_text(token_file, "--token-file", InputError, 64 << 10).strip()
        if not token:
            raise InputError(f"--token-file {token_file}: file is empty")
        return token
    token = environ.get(TOKEN_ENV, "").strip()
    return token or None


class _Redacting(logging.Filter):
    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        clean = redact(text, self.secrets)
        if clean != text:
            record.msg, record.args = clean, None
        return True


@contextmanager
def redacting_logs(token: str | None) -> Iterator[None]:
    """While pushing, every log record (grafana-client's, the HTTP library's) reaches the
    root logger's handlers with ``token`` and any Authorization text redacted."""
    flt = _Redacting([token] if token else [])
    handlers = list(logging.getLogger().handlers)
    for h in handlers:
        h.addFilter(flt)
    try:
        yield
    finally:
        for h in handlers:
            h.removeFilter(flt)


def datasource_payload(url: str) -> dict[str, Any]:
    return {
        "name": DATASOURCE_NAME,
        "uid": DATASOURCE_UID,
        "type": "prometheus",
        "access": "proxy",
        "url": url,
        "isDefault": False,
        "jsonData": {"timeInterval": "15s", "httpMethod": "POST"},
    }


def folder_uid(title: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "folder"
    return ("soak-" + slug)[:40]  # Grafana limits uids to 40 characters


def _status(exc: Exception) -> int | None:
    return getattr(exc, "status_code", None)


def push(api: Any, boards: list[dict[str, Any]], *, folder: str | None,
         datasource_url: str, dry_run: bool = False) -> list[PushStep]:
    """Make Grafana hold soak's datasource and dashboards; ``api`` is a ``GrafanaApi``."""
    from grafana_client.client import GrafanaClientError

    steps: list[PushStep] = []
    try:
        api.datasource.get_datasource_by_uid(DATASOURCE_UID)
        steps.append(PushStep("datasource", DATASOURCE_UID, DATASOURCE_NAME, "kept"))
    except GrafanaClientError as exc:
        if _status(exc) != 404:
            raise
        if not dry_run:
            api.datasource.create_datasource(datasource_payload(datasource_url))
        steps.append(PushStep("datasource", DATASOURCE_UID, DATASOURCE_NAME,
                              "would create" if dry_run else "created"))

    target_folder: str | None = None
    if folder:
        target_folder = folder_uid(folder)
        existing = {f.get("uid"): f for f in api.folder.get_all_folders()}
        by_title = [f for f in existing.values() if f.get("title") == folder]
        if target_folder in existing or by_title:
            target_folder = target_folder if target_folder in existing else by_title[0]["uid"]
            steps.append(PushStep("folder", target_folder, folder, "kept"))
        else:
            if not dry_run:
                api.folder.create_folder(folder, uid=target_folder)
            steps.append(PushStep("folder", target_folder, folder,
                                  "would create" if dry_run else "created"))

    for board in boards:
        uid, title = board["uid"], board["title"]
        try:
            api.dashboard.get_dashboard(uid)
            exists = True
        except GrafanaClientError as exc:
            if _status(exc) != 404:
                raise
            exists = False
        if not dry_run:
            body = dict(board, id=None)  # an id from another Grafana would clash; uid decides
            payload: dict[str, Any] = {"dashboard": body, "overwrite": True,
                                       "message": "soak dashboards push"}
            if target_folder:
                payload["folderUid"] = target_folder
            api.dashboard.update_dashboard(payload)
        action = ("would update" if exists else "would create") if dry_run else (
            "updated" if exists else "created")
        steps.append(PushStep("dashboard", uid, title, action))
    return steps


def connect(grafana_url: str, token: str | None, timeout_s: float = 10.0) -> Any:
    """A ``GrafanaApi`` that has answered /api/health; errors name the URL, never the token."""
    from grafana_client import GrafanaApi
    from grafana_client.client import GrafanaException, GrafanaUnauthorizedError

    shown = mask_url(grafana_url)
    parts = urllib.parse.urlsplit(grafana_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--grafana-url {shown}: not an http(s) URL")
    api = GrafanaApi.from_url(grafana_url, credential=token, timeout=timeout_s)
    try:
        api.health.check()
    except GrafanaUnauthorizedError:
        raise InputError(f"--grafana-url {shown}: Grafana refused the credentials (401); "
                         f"check --token-file or ${TOKEN_ENV}") from None
    except GrafanaException as exc:
        raise InputError(f"--grafana-url {shown}: Grafana health check failed "
                         f"({_status(exc) or 'no connection'})") from None
    except Exception as exc:  # niquests connection errors: refused, DNS, TLS
        raise InputError(f"--grafana-url {shown}: cannot connect ({type(exc).__name__})") from None
    return api
