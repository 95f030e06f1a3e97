"""``soak report serve`` (Streamlit app) and ``soak report pdf`` (signed PDF)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from soak.errors import InputError
from soak.output import add_format, print_json
from soak.report import APP_DB_ENV
from soak.runfolder import DB_NAME, DEFAULT_DATA_DIR

if TYPE_CHECKING:
    from soak.report.signing import KeyPair

APP_PATH = Path(__file__).resolve().parent.parent / "report" / "app.py"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="acceptance report: Streamlit app and signed PDF",
        description="The acceptance report of a run: a web app for engineers and a signed PDF for the customer.",
    )
    sub = p.add_subparsers(dest="report_command", metavar="SUBCOMMAND")

    s = sub.add_parser("serve", help="serve the report app (Streamlit), loopback by default")
    s.add_argument("--db", help="store URL (sqlite:///path.db, postgresql+psycopg://...) or SQLite path")
    s.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help=f"folder of run folders (default: ./{DEFAULT_DATA_DIR})")
    s.add_argument("--port", type=int, default=8501, help="TCP port (default: 8501)")
    s.add_argument("--address", default="127.0.0.1", help="listen address (default: 127.0.0.1)")
    s.add_argument("--lang", choices=("en", "zh"), default="en", help="initial language")
    s.add_argument("--refresh-s", type=float, default=5.0, help="live-run refresh period (default: 5)")
    s.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a host name the app is reached by besides its listen address (a proxy's), repeatable; "
                        "the app refuses any other Host header (DNS rebinding)")
    s.add_argument("--dry-run", action="store_true", help="print the streamlit command and exit")
    s.set_defaults(func=_serve)

    q = sub.add_parser("pdf", help="build the (signed) PDF report of a run")
    q.add_argument("run_id", metavar="RUN_ID", help="the run (see `soak runs list`)")
    q.add_argument("-o", "--output", required=True, help="PDF file to write")
    q.add_argument("--db", help=f"store URL or SQLite path (default: DATA_DIR/RUN_ID/{DB_NAME})")
    q.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help=f"folder of run folders (default: ./{DEFAULT_DATA_DIR})")
    q.add_argument("--lang", choices=("en", "zh"), default="en", help="report language (default: en)")
    q.add_argument("--key", help="PEM private key (default: the one soak keys init made, ~/.config/soak/keys "
                                 "or $SOAK_KEYS_DIR; else DATA_DIR/keys, where earlier releases made it)")
    q.add_argument("--cert", help="PEM certificate of the key (default: beside the default key)")
    q.add_argument("--key-passphrase-file", metavar="FILE",
                   help="an encrypted key's passphrase, the first line of FILE (default: $SOAK_KEY_PASSPHRASE)")
    q.add_argument("--unsigned", action="store_true", help="write an unsigned draft even if a key exists")
    q.add_argument("--tsa-url", help="RFC 3161 timestamp authority URL (PAdES B-T)")
    q.add_argument("--font", help="CJK font (.ttf/.ttc/.otf) for Chinese text; default: found in system font folders")
    q.add_argument("--customer", help="customer name on the cover")
    q.add_argument("--site", help="site on the cover")
    q.add_argument("--cluster", help="cluster name on the cover")
    q.add_argument("--node", help="node name on the cover (default: the run's host)")
    add_format(q)
    q.set_defaults(func=_pdf)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def streamlit_command(args: argparse.Namespace) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP_PATH),
        "--server.headless",
        "true",
        "--server.address",
        args.address,
        "--server.port",
        str(args.port),
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--global.developmentMode",
        "false",
        "--client.toolbarMode",
        "viewer",
        "--",
        "--data-dir",
        str(Path(args.data_dir).absolute()),
        "--lang",
        args.lang,
        "--refresh-s",
        str(args.refresh_s),
        # Beyond loopback anyone who reaches the app could press "build PDF": only the key
        # holder signs there, from the command line.
        "--signing",
        "local" if is_loopback(args.address) else "cli",
    ]
    at = cmd.index("--")
    for host in allowed_hosts(args.address, args.allowed_host):
        cmd[at:at] = ["--server.allowedHosts", host]
        at += 2
    return cmd


def app_environ(db: str | None) -> dict[str, str]:
    """The app's environment: the store URL travels here, not in its argv, which ``ps`` shows
    every user of the host (a password in it would be theirs); the environment of a process
    is readable by its owner only."""
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    env.pop(APP_DB_ENV, None)
    if db:
        env[APP_DB_ENV] = db
    return env


WILDCARDS = ("", "0.0.0.0", "::")


def allowed_hosts(address: str, extra: list[str]) -> list[str]:
    """The Host headers the app's WebSocket accepts (Streamlit's ``server.allowedHosts``;
    empty, its default, accepts any, so a page on another site whose name a DNS rebinding
    points at 127.0.0.1 could drive the app): the listen address, loopback's names on
    loopback, this host's names when it listens on every address, and ``extra``."""
    import socket

    hosts = [] if address in WILDCARDS else [address]
    if address in WILDCARDS or is_loopback(address):
        hosts += ["localhost", "127.0.0.1", "::1"]
    if address in WILDCARDS:
        hosts += [socket.gethostname(), socket.getfqdn()]
    return list(dict.fromkeys(h for h in [*hosts, *extra] if h))


def is_loopback(address: str) -> bool:
    import ipaddress

    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _check_listen(address: str, port: int) -> None:
    """Bind once here so a busy port or a foreign address is one line, not Streamlit's traceback."""
    import socket

    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, port))
    except (OSError, OverflowError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(f"--address {address} --port {port}: cannot listen ({reason})") from None


def _serve(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise InputError(f"--port {args.port}: must be 1-65535")
    cmd = streamlit_command(args)
    if args.dry_run:
        print(" ".join(cmd))
        return 0
    if not args.db and not Path(args.data_dir).is_dir():
        raise InputError(f"--data-dir {args.data_dir}: no such folder (runs of `soak run` and `soak demo` "
                         f"go to ./{DEFAULT_DATA_DIR} where they were started; pass that folder or --db URL)")
    _check_listen(args.address, args.port)
    import secrets

    from soak.report.signing import SIGN_TOKEN_ENV

    env = app_environ(args.db)
    host = f"[{args.address}]" if ":" in args.address else args.address
    url = f"http://{host}:{args.port}/"
    if is_loopback(args.address):
        env[SIGN_TOKEN_ENV] = token = secrets.token_urlsafe(32)
        print(f"soak report: serving on {url} (Ctrl-C to stop); to sign PDFs with this data dir's key open "
              f"{url}?token={token}", file=sys.stderr)
    else:
        print(f"soak report: serving on {url} (Ctrl-C to stop); it does not sign: sign with soak report pdf",
              file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    # Become Streamlit rather than wait for it: a SIGTERM from systemd, kill or a test then
    # stops the server itself instead of leaving it orphaned on the port.
    os.execve(cmd[0], cmd, env)
    return 0  # not reached


def resolve_keys(args: argparse.Namespace) -> KeyPair | None:
    from soak.report.signing import default_keypair, load_keypair, read_passphrase

    if args.unsigned:
        return None
    if bool(args.key) != bool(args.cert):
        raise InputError("--key and --cert go together: give both or neither")
    passphrase = read_passphrase(args.key_passphrase_file)
    if args.key:
        return load_keypair(args.key, args.cert, passphrase)
    return default_keypair(Path(args.data_dir), passphrase)


def _pdf(args: argparse.Namespace) -> int:
    from soak.report.build import build_pdf, resolve_store_url
    from soak.report.model import Customer
    from soak.store import Store

    if args.lang == "zh":
        # the font first: a machine without one is told so before the keys and the store are read
        from soak.report.fonts import register_cjk_font

        register_cjk_font(args.font)
    keys = resolve_keys(args)
    url = resolve_store_url(args.run_id, args.db, args.data_dir)
    customer = Customer(args.customer, args.site, args.cluster, args.node)
    signer = keys.signer if keys else None
    if signer is not None and signer.demo:
        print(f"soak report: warning: signed with the soak demo's key ({signer.name}): not an acceptance "
              "signature; make your own with soak keys init, or name one with --key/--cert", file=sys.stderr)
    with Store.open(url, create=False) as store:
        built = build_pdf(
            store,
            args.run_id,
            args.output,
            lang=args.lang,
            customer=customer,
            keys=keys,
            tsa_url=args.tsa_url,
            font=args.font,
        )
    if args.format == "json":
        print_json(
            {
                "path": str(built.path),
                "signed": built.signed,
                "verdict": built.verdict,
                "data_sha256": built.data_sha256,
                "data_rows": built.data_rows,
                "cert_fingerprint_sha256": keys.fingerprint_sha256 if keys else None,
                "signer": signer.name if signer else None,
                "signer_demo_key": signer.demo if signer else None,
                "fonts": list(built.fonts),
            }
        )
        return 0
    print(f"{built.path}  verdict={built.verdict or 'N/A'}  data sha256={built.data_sha256}")
    print(f"fonts: {'; '.join(built.fonts)}")
    if signer:
        print(f"signed by {signer.name}; certificate SHA-256 fingerprint {signer.fingerprint_sha256}")
    else:
        print("UNSIGNED draft: create a key with `soak keys init` or pass --key/--cert", file=sys.stderr)
    return 0
