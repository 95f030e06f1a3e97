"""``soak cluster``: cluster runs (``status``)."""

from __future__ import annotations

import argparse

from soak.cluster.status import add_status_parser


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("cluster", help="cluster runs: the nodes of a run and their state")
    sub = p.add_subparsers(dest="cluster_command", metavar="ACTION")
    add_status_parser(sub)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
