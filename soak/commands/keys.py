"""``soak keys init``: a signing key and self-signed certificate for the PDF reports."""

from __future__ import annotations

import argparse
from pathlib import Path

from soak.output import add_format, print_json
from soak.runfolder import KEYS_DIR_ENV, keys_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("keys", help="signing keys for the PDF reports")
    sub = p.add_subparsers(dest="keys_command", metavar="SUBCOMMAND")
    i = sub.add_parser(
        "init",
        help="create a private key (0600) and a self-signed certificate",
        description="Create signing-key.pem (mode 0600, in a folder made 0700) and signing-cert.pem. "
        "Hand the certificate "
        "(or its SHA-256 fingerprint) to the customer out of band so they can check reports with "
        "`soak verify REPORT.pdf --cert signing-cert.pem`.",
    )
    i.add_argument("--dir", default=None,
                   help=f"where to write the files (default: ${KEYS_DIR_ENV}, else ~/.config/soak/keys: "
                        "outside the data dir, whose run folders travel with their reports)")
    i.add_argument("--cn", default="soak acceptance signer", help="certificate common name")
    i.add_argument("--org", help="certificate organization")
    i.add_argument("--algorithm", choices=("ec", "rsa"), default="ec", help="EC P-256 (default) or RSA 3072")
    i.add_argument("--days", type=int, default=3650, help="validity in days (default: 3650)")
    i.add_argument("--force", action="store_true", help="replace an existing key")
    i.add_argument("--passphrase-file", metavar="FILE",
                   help="encrypt the key with the first line of FILE (then sign with --key-passphrase-file "
                   "or SOAK_KEY_PASSPHRASE)")
    add_format(i)
    i.set_defaults(func=_init)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _init(args: argparse.Namespace) -> int:
    from soak.errors import InputError
    from soak.report.signing import create_keys, read_passphrase

    if args.days <= 0:
        raise InputError(f"--days {args.days}: must be > 0")
    kp = create_keys(
        Path(args.dir) if args.dir else keys_dir(),
        common_name=args.cn,
        organization=args.org,
        algorithm=args.algorithm,
        days=args.days,
        force=args.force,
        passphrase=read_passphrase(args.passphrase_file, {}) if args.passphrase_file else None,
    )
    if args.format == "json":
        print_json({"key": str(kp.key_path), "cert": str(kp.cert_path), "fingerprint_sha256": kp.fingerprint_sha256})
        return 0
    print(f"key:  {kp.key_path} (mode 0600, keep it secret)")
    print(f"cert: {kp.cert_path}")
    print(f"SHA-256 fingerprint: {kp.fingerprint_sha256}")
    return 0
