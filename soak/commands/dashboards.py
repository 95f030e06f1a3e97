"""``soak dashboards``: push the Grafana dashboards, lint them, verify them on a live Prometheus."""

from __future__ import annotations

import argparse
import sys

from soak.errors import InputError, mask_url, redact
from soak.output import add_format, print_json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dashboards",
        help="Grafana dashboards and alert rules: push, lint, verify",
        description="Grafana dashboards and Prometheus alert rules shipped with soak.",
    )
    sub = parser.add_subparsers(dest="dashboards_command", metavar="ACTION")

    push = sub.add_parser(
        "push",
        help="create/update soak's datasource and dashboards in Grafana (idempotent)",
        description="Create the Prometheus datasource (uid soak-prometheus) if missing and "
        "create or update every soak dashboard under its fixed uid. The API token comes from "
        "--token-file or $SOAK_GRAFANA_TOKEN (a service-account token with Editor rights); "
        "it is never printed.",
    )
    push.add_argument("--grafana-url", required=True, metavar="URL",
                      help="Grafana base URL, e.g. http://grafana:3000")
    push.add_argument("--token-file", metavar="FILE",
                      help="file holding the API token (default: $SOAK_GRAFANA_TOKEN)")
    push.add_argument("--folder", metavar="NAME",
                      help="Grafana folder for the dashboards (created if missing; default: General)")
    push.add_argument("--datasource-url", default="http://prometheus:9090", metavar="URL",
                      help="Prometheus URL as Grafana reaches it, used only when the datasource "
                      "is created (default: http://prometheus:9090)")
    push.add_argument("--dir", metavar="DIR", help="folder with the dashboards (default: "
                      "the dashboards/ folder of this soak)")
    push.add_argument("--timeout", type=float, default=10.0, metavar="S",
                      help="per-request timeout in seconds (default: 10)")
    push.add_argument("--dry-run", action="store_true",
                      help="read Grafana and say what would change; write nothing")
    add_format(push)
    push.set_defaults(func=_push)

    lint = sub.add_parser("lint", help="check dashboards and alert rules against soak's metric names")
    lint.add_argument("--dir", metavar="DIR", help="folder with the dashboards (default: built in)")
    add_format(lint)
    lint.set_defaults(func=_lint)

    verify = sub.add_parser(
        "verify",
        help="run every panel and alert query on a Prometheus; fail on queries with no series",
        description="Run every panel, variable and alert query (variables set to match all, "
        "comparisons made 'bool' so healthy alerts still return their series) through "
        "Prometheus' HTTP API. Exit 1 if any query fails or returns no series.",
    )
    verify.add_argument("--prometheus-url", required=True, metavar="URL",
                        help="Prometheus base URL, e.g. http://127.0.0.1:9090")
    verify.add_argument("--dir", metavar="DIR", help="folder with the dashboards (default: built in)")
    verify.add_argument("--cluster", action="store_true",
                        help="Prometheus scrapes a cluster run: fail the queries of what only a cluster "
                        "serves (links, clock offsets, nodes by status) too when they return nothing")
    add_format(verify)
    verify.set_defaults(func=_verify)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _push(args: argparse.Namespace) -> int:
    from grafana_client.client import GrafanaClientError, GrafanaException, GrafanaUnauthorizedError

    from soak import dashboards as d

    directory = d.resolve_dir(args.dir)
    boards = d.load_dashboards(directory)
    token = d.read_token(args.token_file)
    shown = mask_url(args.grafana_url)
    # A server may echo the request (its Authorization header) in an error body, and an HTTP
    # library may log it: neither reaches the terminal or a log with the token in it.
    with d.redacting_logs(token):
        api = d.connect(args.grafana_url, token, timeout_s=args.timeout)
        try:
            steps = d.push(api, boards, folder=args.folder, datasource_url=args.datasource_url,
                           dry_run=args.dry_run)
        except GrafanaUnauthorizedError:
            raise InputError(f"--grafana-url {shown}: Grafana refused the credentials (401); "
                             f"check --token-file or ${d.TOKEN_ENV}") from None
        except GrafanaClientError as exc:
            body = redact(str(exc.message), [token])[:500]
            raise InputError(f"--grafana-url {shown}: Grafana rejected a request "
                             f"({exc.status_code}: {body})") from None
        except GrafanaException as exc:
            raise InputError(f"--grafana-url {shown}: Grafana failed ({exc.status_code})") from None
    if args.format == "json":
        print_json({"grafana_url": shown, "dry_run": args.dry_run,
                    "steps": [s.__dict__ for s in steps]})
    else:
        for s in steps:
            print(f"{s.action:<13} {s.kind:<10} {s.uid:<24} {s.title}")
    return 0


def _lint(args: argparse.Namespace) -> int:
    from soak import dashboards as d

    directory = d.resolve_dir(args.dir)
    problems = d.lint(directory)
    if args.format == "json":
        print_json({"dir": str(directory), "problems": problems})
    else:
        for p in problems:
            print(p)
        print(f"{len(problems)} problem(s) in {directory}", file=sys.stderr)
    return 1 if problems else 0


def _verify(args: argparse.Namespace) -> int:
    from soak import dashboards as d

    directory = d.resolve_dir(args.dir)
    results = d.verify(directory, args.prometheus_url, cluster=args.cluster)
    bad = [r for r in results if not r.ok]
    if args.format == "json":
        rows = [dict(r.__dict__, ok=r.ok) for r in results]
        print_json({"prometheus_url": args.prometheus_url, "queries": len(results),
                    "failed": [row for row in rows if not row["ok"]], "results": rows})
    else:
        for r in results:
            if r.series < 0:
                detail = f"error: {r.error}"
            else:
                detail = f"{r.series} series"
                if r.empty_selectors:
                    detail += "; no series for " + ", ".join(r.empty_selectors)
                    if r.cluster_only:
                        detail += " (only a cluster run serves them: --cluster to require them)"
                    elif r.fault_only:
                        detail += " (served only while a chip reports a fault)"
                elif r.series == 0 and r.needs_history:
                    detail += " (looks back further than the data held; selectors match)"
            print(f"{'ok  ' if r.ok else 'FAIL'} {r.where}: {detail}")
        print(f"{len(results) - len(bad)} of {len(results)} queries passed", file=sys.stderr)
    return 1 if bad else 0
