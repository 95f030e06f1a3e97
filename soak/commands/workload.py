"""``soak workload NAME ...``: start a workload's ranks under torchrun.

Everything after NAME that is not ``--nproc-per-node`` or ``--print`` goes to the workload
(``python -m soak.workloads.NAME --help`` lists it).
"""

from __future__ import annotations

import argparse
import os
import sys

from soak.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "workload",
        help="run a training workload (lm, gemm, collective) under torchrun",
        description="Run lm, gemm or collective with one rank per device (N gloo ranks on CPU). "
        "Other options go to the workload: --run-dir DIR [--size tiny|small|medium|large] "
        "[--steps N | --duration-s S] [--ckpt-every N] [--keep K] [--inject SPEC ...] "
        "[--device-backend auto|npu|cuda|cpu].",
    )
    p.add_argument("name", choices=("lm", "gemm", "collective"))
    p.add_argument("--nproc-per-node", type=int, default=None,
                   help="ranks on this node (default: one per NPU/GPU, 2 on CPU)")
    p.add_argument("--print", action="store_true", help="print the torchrun command, do not run")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def _value(rest: list[str], flag: str) -> str | None:
    for i, arg in enumerate(rest):
        if arg == flag and i + 1 < len(rest):
            return rest[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _default_nproc(backend: str) -> int:
    from soak.device import detect_backend, probe_torch_npu

    name = detect_backend(backend)
    if name == "npu":
        return max(1, probe_torch_npu().device_count or 1)
    if name == "cuda":
        import torch

        return max(1, torch.cuda.device_count())
    return 2


def run(args: argparse.Namespace) -> int:
    from soak.workloads.inject import parse_all
    from soak.workloads.launch import build_command, check_args

    rest = list(args.rest)
    if "-h" in rest or "--help" in rest:
        return _workload_help(args.name)
    # options of ours given after NAME land in the remainder: take them out
    if "--print" in rest:
        rest.remove("--print")
        args.print = True
    own = _value(rest, "--nproc-per-node")
    if own is not None:
        if not own.isdigit():
            raise InputError(f"--nproc-per-node {own!r}: must be a positive integer")
        args.nproc_per_node = int(own)
        rest = _strip(rest, "--nproc-per-node")
    if _value(rest, "--run-dir") is None:
        raise InputError("soak workload: --run-dir DIR is required")
    check_args(args.name, rest)  # one line and exit 2, not a failure per rank
    injects = [rest[i + 1] for i, a in enumerate(rest) if a == "--inject" and i + 1 < len(rest)]
    parse_all(injects, args.name)  # a bad spec is one line and exit 2, before torchrun starts
    nproc = args.nproc_per_node or _default_nproc(_value(rest, "--device-backend") or "auto")
    if nproc < 1:
        raise InputError(f"--nproc-per-node {nproc}: must be at least 1")
    run_dir = _value(rest, "--run-dir") or ""
    # build_command adds --run-dir; the rest passes through untouched otherwise
    i = rest.index("--run-dir") if "--run-dir" in rest else None
    if i is not None:
        del rest[i : i + 2]
    else:
        rest = [a for a in rest if not a.startswith("--run-dir=")]
    argv = build_command(args.name, run_dir, nproc, size=_value(rest, "--size") or "tiny",
                         extra=[a for a in _strip(rest, "--size")])
    if args.print:
        print(" ".join(argv))
        return 0
    sys.stdout.flush()
    os.execv(argv[0], argv)  # torchrun gets our signals directly
    return 0  # not reached


def _workload_help(name: str) -> int:
    """`soak workload lm --help`: the workload's own options (argparse would stop at --run-dir)."""
    import importlib

    print(f"soak workload {name} [--nproc-per-node N] [--print] WORKLOAD-OPTIONS; the workload's options:\n")
    sys.stdout.flush()
    try:
        importlib.import_module(f"soak.workloads.{name}").main(["--help"])
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _strip(rest: list[str], flag: str) -> list[str]:
    out: list[str] = []
    skip = False
    for a in rest:
        if skip:
            skip = False
            continue
        if a == flag:
            skip = True
            continue
        if a.startswith(flag + "="):
            continue
        out.append(a)
    return out
