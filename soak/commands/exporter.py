"""``soak exporter``: a standalone Prometheus exporter for one node's devices."""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import sys
import threading

from exporters.listen import DEFAULT_LISTEN, parse_listen
from soak.errors import DeviceUnavailable, InputError
from soak.telemetry.sampler import DEFAULT_INTERVAL_S


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "exporter",
        help="serve device metrics for Prometheus (/metrics)",
        description="Serve this node's device metrics on /metrics. A background sampler reads the "
        "devices every --interval seconds; a scrape only reads the cached snapshot.",
    )
    p.add_argument("--web-config", metavar="FILE",
                   help="TLS and basic auth of /metrics: a web config file in node_exporter's format "
                        "(tls_server_config: cert_file, key_file, client_ca_file; basic_auth_users: bcrypt hashes)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a dotted name Prometheus scrapes this exporter by (repeatable); without basic auth "
                        "/metrics answers 403 to any other Host (addresses, localhost, single-label names "
                        "and this host's names are always allowed)")
    p.add_argument("--listen", default=DEFAULT_LISTEN,
                   help=f"HOST:PORT to listen on (default: {DEFAULT_LISTEN}; ':19400' for all interfaces)")
    p.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S,
                   help=f"seconds between samples (default: {DEFAULT_INTERVAL_S:g})")
    p.add_argument("--backend", choices=("auto", "npu", "cuda", "cpu", "sim"), default="auto",
                   help="device backend (default: auto = npu if npu-smi is on PATH, else cuda, else cpu)")
    p.add_argument("--npu-smi", default="npu-smi", help="npu-smi command or path (default: npu-smi)")
    p.add_argument("--hccn-tool", default="hccn_tool", help="hccn_tool command or path (default: hccn_tool)")
    p.add_argument("--plog-dir", default=None, help="HCCL plog folder to count communication timeouts in")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds before a vendor-tool call is killed (default: 10)")
    p.add_argument("--detail-interval", type=float, default=60.0,
                   help="seconds between npu-smi -t queries and hccn_tool calls (default: 60; 0 = off)")
    p.add_argument("--compat", action="append", choices=("npu-exporter",), default=[],
                   help="also emit Huawei npu-exporter metric names (npu_chip_info_*)")
    p.add_argument("--sim-scenario", action="append", default=None,
                   help="--backend sim: scenario spec, e.g. healthy,hbm_creep:rate_mb_h=200 (repeatable)")
    p.add_argument("--sim-fault", action="append", default=[], help="--backend sim: tool fault spec")
    p.add_argument("--sim-family", choices=("910b", "910_93", "310p"), default="910b",
                   help="--backend sim: chip family (default: 910b)")
    p.add_argument("--sim-chips", type=int, default=8, help="--backend sim: number of chips (default: 8)")
    p.add_argument("--sim-seed", type=int, default=0, help="--backend sim: noise seed")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="--backend sim: scaled seconds per wall second (default: 1)")
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                   help="log lines on stderr from this level up (default: INFO)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from exporters.pipeline import start_pipeline
    from soak.clock import ScaledClock
    from soak.telemetry.backends import make_backend

    logging.basicConfig(stream=sys.stderr, level=args.log_level,
                        format="%(asctime)s soak-exporter %(levelname)s %(message)s")
    log = logging.getLogger("soak.exporter")
    if args.interval <= 0:
        raise InputError(f"--interval {args.interval}: must be greater than 0")
    if args.timeout <= 0:
        raise InputError(f"--timeout {args.timeout}: must be greater than 0")
    parse_listen(args.listen)  # bad input fails before any device is touched
    web_config = None
    if args.web_config:
        from exporters.webconfig import load_web_config

        web_config = load_web_config(args.web_config)
    if args.npu_smi != "npu-smi" and args.backend != "sim" and shutil.which(args.npu_smi) is None:
        # A path the user typed that is not there would serve empty series for hours.
        raise InputError(f"--npu-smi {args.npu_smi}: no such executable")
    if args.backend == "sim" and not 1 <= args.sim_chips <= 64:
        # Named here: the simulator itself would blame its own flag, --chips.
        raise InputError(f"--sim-chips {args.sim_chips}: must be between 1 and 64")
    clock = None
    if args.backend == "sim" and args.time_scale != 1.0:
        import time

        clock = ScaledClock(scale=args.time_scale, origin=time.time())
    try:
        backend = make_backend(
            args.backend, npu_smi=args.npu_smi, hccn_tool=args.hccn_tool, plog_dir=args.plog_dir,
            timeout_s=args.timeout, detail_interval_s=args.detail_interval or None, details_in_background=True,
            clock=clock,
            sim_scenario=args.sim_scenario or ["healthy"], sim_fault=args.sim_fault,
            sim_family=args.sim_family, sim_chips=args.sim_chips, sim_seed=args.sim_seed,
        )
    except DeviceUnavailable:
        raise  # one line on stderr, exit 2 (the CLI prints UserError messages)
    stop = threading.Event()

    def _on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        pipeline = start_pipeline(backend, listen=args.listen, interval_s=args.interval,
                                  tool_timeout_s=args.timeout, compat=args.compat, web_config=web_config,
                                  allowed_hosts=args.allowed_host)
    except BaseException:
        backend.close()
        raise
    assert pipeline.server is not None  # args.listen is never empty
    log.info("backend %s, sampling every %gs; serving %s", backend.name, args.interval, pipeline.server.url)
    try:
        while not stop.wait(3600):
            pass
    finally:
        pipeline.stop(timeout_s=args.timeout + 5)
        backend.close()
        sampler = pipeline.sampler
        log.info("stopped after %d ticks (%d sink errors)", sampler.ticks, sampler.sink_errors)
    return 0
