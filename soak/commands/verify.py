"""``soak verify FILE``: check a signed soak report (exit 0 only when it holds)."""

from __future__ import annotations

import argparse

from soak.commands._common import add_format, print_json


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "verify",
        help="check the signature and data digest of a soak PDF report",
        description="Exit 0 when the signature is intact and valid, covers the whole file, the "
        "attached raw data matches the digest in the report, and (with --cert) the signer is that "
        "certificate; exit 1 otherwise; exit 2 for a missing file or one that is not a PDF.",
    )
    p.add_argument("file", metavar="FILE", help="the PDF report")
    p.add_argument("--cert", help="the signer's certificate (PEM/DER): also require trust in it")
    add_format(p)
    p.set_defaults(func=_verify)


def _verify(args: argparse.Namespace) -> int:
    from soak.report.verify import verify_pdf

    res = verify_pdf(args.file, args.cert)
    if args.format == "json":
        print_json(res.to_dict())
        return 0 if res.ok else 1

    def yn(v: bool | None) -> str:
        return "N/A" if v is None else ("yes" if v else "NO")

    print(f"file:           {res.file}")
    print(f"signed:         {yn(res.signed)}")
    print(f"intact:         {yn(res.intact)}")
    print(f"valid:          {yn(res.valid)}")
    print(f"whole file:     {yn(res.coverage_entire_file)}")
    print(f"trusted:        {yn(res.trusted)}{'' if args.cert else ' (pass --cert to check)'}")
    print(f"signer:         {res.signer or 'N/A'}")
    print(f"fingerprint:    {res.signer_fingerprint_sha256 or 'N/A'}")
    print(f"signing time:   {res.signing_time or 'N/A'}")
    print(f"timestamp:      {res.timestamp_time or 'N/A'}")
    print(f"run:            {res.run_id or 'N/A'}  verdict: {res.verdict or 'N/A'}")
    print(f"data sha256:    {res.data_sha256 or 'N/A'}")
    match = "N/A" if res.data_sha256_attached is None else ("matches" if res.data_sha256_attached == res.data_sha256 else "DIFFERS")
    print(f"attached data:  {match}")
    print(f"result:         {'OK' if res.ok else 'FAILED'}")
    for p in res.problems:
        print(f"  - {p}")
    return 0 if res.ok else 1
