"""``soak verify FILE --cert CERT``: check a signed soak report (exit 0 only when it holds)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from soak.output import add_format, print_json

if TYPE_CHECKING:
    from soak.report.verify import VerifyResult


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "verify",
        help="check the signature, signer and data digest of a soak PDF report",
        description="Exit 0 when the signature is readable, valid and intact, covers the whole file, "
        "the attached raw data matches the digest in the report, and the signer is a --cert "
        "certificate (or issued by one); exit 1 otherwise, also when no --cert is given; exit 2 for "
        "a missing file or certificate, or a file that is not a PDF. --integrity-only checks "
        "everything but the signer.",
    )
    p.add_argument("file", metavar="FILE", help="the PDF report")
    p.add_argument(
        "--cert",
        action="append",
        metavar="CERT",
        help="the certificate the vendor published (PEM/DER; a PEM file may hold several; repeatable): "
        "the signer must be one of them or issued by one",
    )
    p.add_argument(
        "--tsa-cert",
        action="append",
        default=[],
        metavar="CERT",
        help="the certificate of a timestamp authority you trust (PEM/DER, repeatable): a timestamp "
        "from any other TSA is printed as untrusted, and with --tsa-cert fails the check",
    )
    p.add_argument(
        "--integrity-only",
        action="store_true",
        help="check that the report is unchanged but not who signed it (anyone can sign with a key of "
        "their own); the result says the signer was not checked",
    )
    add_format(p)
    p.set_defaults(func=_verify)


def _verify(args: argparse.Namespace) -> int:
    from soak.report.verify import verify_pdf

    res = verify_pdf(args.file, args.cert, integrity_only=args.integrity_only, tsa_cert=args.tsa_cert)
    if args.format == "json":
        print_json(res.to_dict())
        return 0 if res.ok else 1

    def yn(v: bool | None) -> str:
        return "N/A" if v is None else ("yes" if v else "NO")

    if res.integrity_only:
        trusted = "not checked (--integrity-only)"
    elif res.trusted is None:
        trusted = "N/A (no valid signature)"
    elif not res.trust_anchors:
        trusted = "NO (no --cert given)"
    else:
        trusted = f"{yn(res.trusted)} (against {len(res.trust_anchors)} --cert certificate{'s' if len(res.trust_anchors) > 1 else ''})"
    print(f"file:           {res.file}")
    print(f"signed:         {yn(res.signed)}")
    print(f"intact:         {yn(res.intact)}")
    print(f"valid:          {yn(res.valid)}")
    print(f"whole file:     {yn(res.coverage_entire_file)}")
    print(f"trusted:        {trusted}")
    demo = " (the soak demo's key: not an acceptance signature)" if res.signer_demo_key else ""
    print(f"signer:         {res.signer or 'N/A'}{demo}")
    print(f"fingerprint:    {res.signer_fingerprint_sha256 or 'N/A'}")
    print(f"signing time:   {res.signing_time or 'N/A'}")
    print(f"timestamp:      {_timestamp(res)}")
    print(f"run:            {res.run_id or 'N/A'}  verdict: {res.verdict or 'N/A'}")
    print(f"data sha256:    {res.data_sha256 or 'N/A'}")
    match = "N/A" if res.data_sha256_attached is None else ("matches" if res.data_sha256_attached == res.data_sha256 else "DIFFERS")
    print(f"attached data:  {match}")
    if not res.ok:
        result = "FAILED"
    elif res.integrity_only:
        result = "OK (integrity only: the signer was not checked)"
    else:
        result = "OK"
    print(f"result:         {result}")
    for p in res.problems:
        print(f"  - {p}")
    return 0 if res.ok else 1


def _timestamp(res: VerifyResult) -> str:
    """The timestamp line: its time is the signing time only when its TSA is trusted."""
    if not res.timestamped:
        return "N/A"
    if res.timestamp_trusted:
        return f"{res.timestamp_time} (trusted: TSA {res.timestamp_tsa})"
    why = "no --tsa-cert given" if not res.tsa_anchors else "not a --tsa-cert certificate nor issued by one"
    return (f"UNTRUSTED, not the signing time: {res.timestamp_time} claimed by TSA {res.timestamp_tsa or 'N/A'} "
            f"({why})")
