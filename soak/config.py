"""The run plan: what ``soak run`` does, as nested frozen dataclasses read from TOML.

Every field documents itself (``doc`` in its metadata, also used by docs/daemon.md). Unknown
keys and bad values raise ``ConfigError`` with one line that names the dotted key, e.g.
``run.duration must be like 72h, 30m or 90s``.

Times come in two kinds. Run-level spans (``run.duration``, ``phases.checkpoint_every``,
``jobs.*``) are on the run's time line, which ``run.time_scale`` accelerates on a simulated
fleet. Process-level spans (``sampling.interval``, ``restart.*``) are wall seconds: a hung
process or a backoff takes real time whatever the scale.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from exporters.listen import DEFAULT_LISTEN, parse_listen
from soak.errors import ConfigError, InputError, UserError, masked
from soak.runfolder import DB_NAME, DEFAULT_DATA_DIR, RESERVED_IDS, RUN_ID_MAX_CHARS
from soak.telemetry import BACKENDS
from soak.telemetry.sampler import DEFAULT_INTERVAL_S
from soak.tomlfile import finite, read_toml, toml_value

MAX_SPAN_S = 366 * 86400.0
"""Longest duration or period a plan may give: a year is far beyond any soak, and bounds the
run's end time (an infinite ``run.duration`` would leave a run that never ends)."""
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_SIZES = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
WORKLOADS = ("lm", "gemm", "collective")
SIZES = ("tiny", "small", "medium", "large")


def parse_duration(value: Any, key: str, *, allow_zero: bool = False) -> float:
    """``72h``, ``30m``, ``90s``, ``1.5h``, ``2d`` or a number of seconds -> seconds."""
    if isinstance(value, bool):
        raise ConfigError(f"{key} must be like 72h, 30m or 90s")
    if isinstance(value, int | float):
        seconds = float(min(value, 2 * MAX_SPAN_S))  # a huge integer would not fit a float
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*", str(value).lower())
        if not m or m.group(2) not in _UNITS:
            raise ConfigError(f"{key} must be like 72h, 30m or 90s, got {value!r}")
        seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if math.isnan(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        raise ConfigError(f"{key} must be greater than 0, got {value!r}")
    if seconds > MAX_SPAN_S:
        raise ConfigError(f"{key} must be at most 366d, got {value!r}")
    return seconds


def parse_size(value: Any, key: str) -> int:
    """``2GiB``, ``500MB`` or a number of bytes -> bytes."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*", str(value).lower())
    if not m or (m.group(2) or "b") not in _SIZES:
        raise ConfigError(f"{key} must be a size like 2GiB or 500MB, got {value!r}")
    size = float(m.group(1)) * _SIZES[m.group(2) or "b"]
    if not math.isfinite(size):
        raise ConfigError(f"{key} must be a size like 2GiB or 500MB, got {value!r}")
    return int(size)


def _web_config(value: Any, key: str) -> str | None:
    """A web config file that loads (``exporters.webconfig``), checked when the plan is read."""
    if value in (None, ""):
        return None
    from exporters.webconfig import load_web_config

    try:
        load_web_config(str(value), key)
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    return str(value)


def _listen(value: Any, key: str) -> str | None:
    """``HOST:PORT`` as the exporter parses it (empty string: no exporter)."""
    if value in (None, ""):
        return None
    try:
        parse_listen(str(value), key)
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    return str(value)


def is_host_port(value: str) -> bool:
    """``HOST:PORT`` with a host (a name, an IPv4 or a bracketed IPv6 address) and a port
    1-65535: the form of torchrun's rendezvous endpoint."""
    host, sep, port = value.rpartition(":")
    return bool(sep and host.strip("[]") and port.isdigit() and 0 < int(port) < 65536)


def _rendezvous(value: Any, key: str) -> str | None:
    """The rendezvous endpoint: a listen address that names its host. An empty host would
    mean every interface to a server; to torchrun's agents it is an endpoint no node reaches,
    and they would wait at the barrier until the join timeout."""
    endpoint = _listen(value, key)
    if endpoint is not None and not is_host_port(endpoint):
        raise ConfigError(f"{key} must be HOST:PORT with the host of node rank 0 and a port 1-65535, got {endpoint!r}")
    return endpoint


def _advertise(value: Any, key: str) -> str | None:
    """A host name or address without a port (the rendezvous keeps cluster.rendezvous's
    port); an IPv6 address with or without brackets."""
    text = _opt_string(value, key)
    if text is None:
        return None
    host = text.strip("[]")
    if not host or host.count(":") == 1 or any(c.isspace() or c in "/@" for c in host):
        raise ConfigError(f"{key} must be a host name or address without a port (the port is cluster.rendezvous's), "
                          f"got {text!r}")
    return host


def _choice(options: tuple[str, ...]) -> Callable[[Any, str], str]:
    def parse(value: Any, key: str) -> str:
        if value not in options:
            raise ConfigError(f"{key} must be one of {', '.join(options)}, got {value!r}")
        return str(value)

    return parse


def _number(minimum: float, *, integer: bool = False, strict: bool = False) -> Callable[[Any, str], Any]:
    def parse(value: Any, key: str) -> Any:
        ok = isinstance(value, int | float) and finite(value) and (isinstance(value, int) or not integer)
        if isinstance(value, bool) or not ok or value < minimum or (strict and value == minimum):
            what = "an integer" if integer else "a number"
            cmp = ">" if strict else ">="
            raise ConfigError(f"{key} must be {what} {cmp} {minimum}, got {value!r}")
        return int(value) if integer else float(value)

    return parse


def _string(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{key} must be a string, got {value!r}")
    return value


def _opt_string(value: Any, key: str) -> str | None:
    return None if value in (None, "") else _string(value, key)


def _node_name(value: Any, key: str) -> str | None:
    from soak.cluster.hostfile import NODE_NAME_RULE, valid_node_name

    text = _opt_string(value, key)
    if text is not None and not valid_node_name(text):
        raise ConfigError(f"{key} {text!r}: a node name must be {NODE_NAME_RULE}")
    return text


def check_run_id(value: Any, key: str) -> str | None:
    """``value`` as a run id (None when empty), or one ``ConfigError`` naming ``key``: the
    rule every id a run folder is named by passes, a new run's (``run.id``) or a resumed one's."""
    # The id names a folder under run.data_dir (and a systemd instance): a slash or a leading
    # dot would put the run somewhere else or hide it from `soak runs list`.
    # One limit, the store's: checked here, before a folder or a row exists.
    text = _opt_string(value, key)
    if text is not None and not re.fullmatch(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{RUN_ID_MAX_CHARS - 1}}}", text):
        raise ConfigError(
            f"{key} must be letters, digits, '.', '_' or '-' (starting with a letter or digit, "
            f"at most {RUN_ID_MAX_CHARS}), got {text!r}"
        )
    if text in RESERVED_IDS:
        raise ConfigError(f"{key} {text!r} names the signing keys' folder in the data dir: give another run id")
    return text


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    return value


def _strings(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of strings, got {value!r}")
    return tuple(value)


def _numbers_table(value: Any, key: str) -> Mapping[str, float | int]:
    if not isinstance(value, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and finite(v) for v in value.values()
    ):
        raise ConfigError(f"{key} must be a table of numbers, got {value!r}")
    return {str(k): v if isinstance(v, int) else float(v) for k, v in value.items()}


def opt(default: Any, doc: str, parse: Callable[[Any, str], Any] | None = None, key: str | None = None,
        raw: Any = MISSING) -> Any:
    """A plan field: default (already parsed), one-line doc, parser of the TOML value,
    the TOML key when it differs from the field name, and the TOML spelling of the default."""
    meta = {"doc": doc, "parse": parse, "key": key, "raw": raw}
    if isinstance(default, list | dict):
        return field(default_factory=lambda: default, metadata=meta)
    return field(default=default, metadata=meta)


def _dur(allow_zero: bool = False) -> Callable[[Any, str], float]:
    return lambda v, k: parse_duration(v, k, allow_zero=allow_zero)


@dataclass(frozen=True)
class RunSection:
    duration_s: float = opt(3600.0, "How long the soak runs, on the run's time line (72h, 30m, 90s).",
                            _dur(), key="duration", raw="1h")
    data_dir: str = opt(f"./{DEFAULT_DATA_DIR}", "Folder holding one sub-folder per run.", _string)
    db: str | None = opt(None, f"Store URL (sqlite:///..., postgresql+psycopg://...); empty: <run folder>/{DB_NAME}.", _opt_string)
    time_scale: float = opt(1.0, "Recorded seconds per wall second (sim backend only); 720 plays 72 h in 6 min.",
                            _number(0, strict=True))
    preflight: bool = opt(True, "Run the environment self-check before the workloads and record it.", _bool)
    id: str | None = opt(None, "Run id; empty: <UTC time>-<host>.", check_run_id)


@dataclass(frozen=True)
class DevicesSection:
    backend: str = opt("auto", "Telemetry backend: auto, npu, cuda, cpu or sim (simulated Ascend fleet).",
                       _choice(BACKENDS))
    npu_smi: str | None = opt(None, "Path of npu-smi; empty: found on PATH (or the simulated one).", _opt_string)
    plog_dir: str | None = opt(None, "HCCL plog folder watched for communication timeouts; empty: none.", _opt_string)
    expect_chips: int = opt(0, "Chips this node must read for the run to pass; 0: at least one (the simulated fleet's size on sim).",
                            _number(0, integer=True))


@dataclass(frozen=True)
class WorkloadSpec:
    name: str = opt("lm", "Workload: lm, gemm or collective.", _choice(WORKLOADS))
    size: str = opt("tiny", "Preset size: tiny, small, medium or large.", _choice(SIZES))
    nproc: int = opt(1, "Ranks on this node (torchrun --nproc-per-node).", _number(1, integer=True))
    extra: tuple[str, ...] = opt((), "Extra arguments passed to the workload (e.g. [\"--ckpt-every\", \"50\"]).",
                                 _strings)


DETAIL_RUN_S = 60.0
"""The slow views' default interval on the run's time line (``SamplingSection.detail_wall_s``)."""


@dataclass(frozen=True)
class SamplingSection:
    interval_s: float = opt(DEFAULT_INTERVAL_S,
                            "Telemetry tick, wall seconds (5 s keeps a 72 h x 16-chip run near 0.1 GB).",
                            _dur(), key="interval", raw=f"{DEFAULT_INTERVAL_S:g}s")
    flush_every_s: float = opt(5.0, "Commit buffered samples at least this often (wall); a crash loses at most this much.",
                               _dur(), key="flush_every", raw="5s")
    detail_interval_s: float | None = opt(None, "How often each chip's slow views are read (wall): npu-smi -t "
                                                "health/ecc/usages and hccn_tool; a fault the chip reports is seen "
                                                "within this. Empty: one minute of the run's time line (60 s / time "
                                                "scale), never shorter than the tick.",
                                          lambda v, k: None if v in (None, "") else parse_duration(v, k),
                                          key="detail_interval", raw="")

    def detail_wall_s(self, time_scale: float | None = None) -> float:
        """The slow views' interval in wall seconds: the one given, else one minute of the run's
        time line (an accelerated run reads them as often in run time as a real one), never
        shorter than the tick."""
        if self.detail_interval_s is not None:
            return float(self.detail_interval_s)
        return max(float(self.interval_s), DETAIL_RUN_S / float(time_scale or 1.0))


@dataclass(frozen=True)
class FaultsSection:
    inject: tuple[str, ...] = opt((), "Faults injected into every workload, e.g. [\"crash:40\", \"leak:50MB/min\"].",
                                  _strings)
    codes_file: str | None = opt(None, "The site's own fault-code table in the device plugin's faultCode.json format, "
                                 "laid over the built-in one (its level wins for each code it names); empty: the "
                                 "built-in table (docs/faults.md). Checked when soak run starts.", _opt_string)


@dataclass(frozen=True)
class AcceptanceSection:
    profile: str = opt("default", "Acceptance profile: \"default\" or the path of a profile TOML (docs/analysis.md).", _string)
    thresholds: Mapping[str, float | int] = opt({}, "Overrides of profile values, \"section.key\" = number (docs/analysis.md).",
                                          _numbers_table)


@dataclass(frozen=True)
class PhasesSection:
    checkpoint_every_s: float | None = opt(None, "Expected checkpoint cadence (run time line): the analysis expects the chips to idle then.",
                                           lambda v, k: None if v in (None, "") else parse_duration(v, k),
                                           key="checkpoint_every", raw="")
    checkpoint_duration_s: float = opt(120.0, "How long a checkpoint may idle the chips (run time line).", _dur(),
                                       key="checkpoint_duration", raw="2m")


@dataclass(frozen=True)
class SimSection:
    family: str = opt("910b", "Simulated chip family: 910b, 910_93 or 310p.", _string)
    chips: int = opt(8, "Simulated chips on this node.", _number(1, integer=True))
    scenario: str = opt("healthy", "Scenario spec, e.g. \"healthy,hbm_creep:rate_mb_h=200,chips=0\".", _string)
    fault: str = opt("", "Tool fault spec, e.g. \"slow:seconds=5\"; empty: none.", _string)
    seed: int = opt(0, "Random seed of the simulated readings.", _number(0, integer=True))
    driver_version: str | None = opt(None, "Driver version the simulated npu-smi prints; empty: the family's "
                                     "(a node-local key: one node can simulate a driver that differs).", _opt_string)


@dataclass(frozen=True)
class ExporterSection:
    listen: str | None = opt(DEFAULT_LISTEN, "HOST:PORT of /metrics (device and run metrics); :PORT for all interfaces; empty: none.",
                             _listen)
    web_config: str | None = opt(None, "TLS and basic auth of /metrics: a web config file in node_exporter's format "
                                 "(tls_server_config, basic_auth_users); empty: plain HTTP, no auth.", _web_config)


@dataclass(frozen=True)
class RestartSection:
    max_restarts: int = opt(5, "Give up (status failed) after this many restarts.", _number(0, integer=True))
    backoff_initial_s: float = opt(5.0, "First restart delay (wall); doubles each time.", _dur(True),
                                   key="backoff_initial", raw="5s")
    backoff_max_s: float = opt(300.0, "Longest restart delay (wall).", _dur(), key="backoff_max", raw="5m")
    hang_timeout_s: float = opt(600.0, "A live workload whose step has not moved for this long (wall) is hung.",
                                _dur(), key="hang_timeout", raw="10m")
    stop_grace_s: float = opt(15.0, "Wait this long after SIGTERM before SIGKILL (wall).", _dur(),
                              key="stop_grace", raw="15s")


@dataclass(frozen=True)
class JobsSection:
    analysis_every_s: float = opt(300.0, "Online analysis period (wall).", _dur(), key="analysis_every", raw="5m")
    wal_checkpoint_every_s: float = opt(600.0, "SQLite WAL checkpoint period (wall).", _dur(),
                                        key="wal_checkpoint_every", raw="10m")
    disk_check_every_s: float = opt(30.0, "Free-space check period (wall).", _dur(), key="disk_check_every", raw="30s")
    min_free_bytes: int = opt(1 << 30, "Stop cleanly when the run folder's disk has less free space than this.",
                              parse_size, key="min_free", raw="1GiB")


@dataclass(frozen=True)
class CaptureSection:
    steps: int = opt(10, "Steps per profiler capture (baseline, cadence, on a finding); 0: no captures.",
                     _number(0, integer=True))
    every_s: float = opt(0.0, "A capture on every rank this often (wall); 0: only the baseline and those findings ask for.",
                         _dur(True), key="every", raw="0s")
    max_per_hour: int = opt(4, "Captures the daemon asks for at most per hour, on throughput or dropout findings.",
                            _number(0, integer=True))
    max_trace_bytes: int = opt(50 * 10**6, "Largest trace kept in the run folder; a larger one keeps only its summary.",
                               parse_size, key="max_trace", raw="50MB")


def _opt_rank(value: Any, key: str) -> int | None:
    return None if value in (None, "") else _number(0, integer=True)(value, key)


def _choice_policy(value: Any, key: str) -> str:
    return _choice(("continue", "stop"))(value, key)


@dataclass(frozen=True)
class ClusterSection:
    nodes: int = opt(1, "Nodes in the run; more than 1 makes a cluster run (shared PostgreSQL store, torchrun c10d rendezvous).",
                     _number(1, integer=True))
    node_rank: int | None = opt(None, "This node's rank 0..nodes-1; empty: from the launcher's environment "
                                "(JOB_COMPLETION_INDEX, VC_TASK_INDEX, PET_NODE_RANK, SLURM_NODEID).", _opt_rank)
    node_name: str | None = opt(None, "This node's name; empty: NODE_NAME from the environment, else the host name.",
                                _node_name)
    rendezvous: str | None = opt(None, "HOST:PORT of torchrun's c10d rendezvous store, hosted by node rank 0 (once it is "
                                 "lost, by the live node of lowest rank at its address, cluster.advertise).",
                                 _rendezvous)
    advertise: str | None = opt(None, "The address the other nodes reach this node at when the job's rendezvous moves "
                                "to it (its host lost); empty: on node rank 0 the host of cluster.rendezvous, on the "
                                "others the local address of their route to that host.", _advertise)
    join_timeout_s: float = opt(600.0, "How long (wall) the nodes wait for each other to join.", _dur(),
                                key="join_timeout", raw="10m")
    node_silence_s: float = opt(60.0, "A node not seen in the store for this long (wall) is lost; the term of the "
                                "judging lease, which its holder renews every second.", _dur(),
                                key="node_silence", raw="60s")
    link_test_every_s: float = opt(3600.0, "Pairwise link test between the nodes before the first step, then this often "
                                   "(run time line); 0: at the start only.", _dur(True), key="link_test_every", raw="1h")
    link_test_bytes: int = opt(0, "All-reduce size of the link test; 0: by the workload's preset (1 MiB tiny, "
                               "16 MiB small, 256 MiB medium, 1 GiB large).", parse_size, key="link_test_bytes", raw="0")
    store_outage_max_s: float = opt(900.0, "How long (wall) an agent rides out a store that does not answer: it keeps "
                                    "training and sampling, keeps what it cannot write in a spool file in its run "
                                    "folder and writes it once the store is back; longer, it stops with the spool "
                                    "kept (soak run --resume writes it). Single-node runs too.", _dur(),
                                    key="store_outage_max", raw="15m")
    max_clock_offset_s: float = opt(2.0, "How far (wall) a node's clock may be from the store's (the database's) "
                                    "clock: a node further off is refused at join, naming its offset; a drift past it "
                                    "during the run is an event. Liveness, leadership and loss use the store's clock.",
                                    _dur(), key="max_clock_offset", raw="2s")
    on_node_lost: str = opt("continue", "When a node is lost: continue (the others go on training: evidence keeps "
                            "coming) or stop the run.", _choice_policy)


def _node_counts(value: Any, key: str) -> tuple[int, ...]:
    if not isinstance(value, list | tuple) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1_000_000 for v in value):
        raise ConfigError(f"{key} must be a list of node counts (integers 1..1000000), got {value!r}")
    return tuple(sorted(set(value)))


@dataclass(frozen=True)
class ReliabilitySection:
    project_nodes: tuple[int, ...] = opt((64, 256), "Job sizes in nodes the MTTF lower bound is projected to, besides "
                                         "this run's own (a job over N nodes: the node's bound / N).", _node_counts,
                                         raw=[64, 256])


def _opt_count(value: Any, key: str) -> int | None:
    return None if value in (None, "") else _number(0, integer=True)(value, key)


@dataclass(frozen=True)
class NumericsSection:
    check_every: int = opt(100, "Every this many steps each rank of lm proves its chip computed right: a cross-chip "
                           "recompute of the loss and a replica checksum (docs/workloads.md); 0: none.",
                           _number(0, integer=True))
    spike_multiple: float = opt(4.0, "A loss this many times the median of the rank's last 100 is a loss spike.",
                                _number(1, strict=True))
    align_steps: int | None = opt(None, "Precision alignment: the first N losses of lm against a CPU float64 "
                                  "reference of the same seed; empty: 10 for tiny and small, 0 (none) for "
                                  "medium and large.", _opt_count, raw="")


# The keys that differ from node to node: the plan digest every node must agree on leaves them
# out (the store URL too: a node may reach the one database through its own pgbouncer or name).
NODE_LOCAL_KEYS = (("cluster", "node_rank"), ("cluster", "node_name"), ("cluster", "advertise"),
                   ("run", "data_dir"), ("run", "db"),
                   ("exporter", "listen"), ("exporter", "web_config"), ("devices", "npu_smi"), ("devices", "plog_dir"),
                   ("sim", "driver_version"))


@dataclass(frozen=True)
class Plan:
    """A run plan. Sections map to TOML tables; ``workloads`` is an array of tables."""

    run: RunSection = field(default_factory=RunSection)
    devices: DevicesSection = field(default_factory=DevicesSection)
    workloads: tuple[WorkloadSpec, ...] = (WorkloadSpec(),)
    sampling: SamplingSection = field(default_factory=SamplingSection)
    faults: FaultsSection = field(default_factory=FaultsSection)
    acceptance: AcceptanceSection = field(default_factory=AcceptanceSection)
    phases: PhasesSection = field(default_factory=PhasesSection)
    sim: SimSection = field(default_factory=SimSection)
    exporter: ExporterSection = field(default_factory=ExporterSection)
    restart: RestartSection = field(default_factory=RestartSection)
    jobs: JobsSection = field(default_factory=JobsSection)
    capture: CaptureSection = field(default_factory=CaptureSection)
    cluster: ClusterSection = field(default_factory=ClusterSection)
    reliability: ReliabilitySection = field(default_factory=ReliabilitySection)
    numerics: NumericsSection = field(default_factory=NumericsSection)

    def __post_init__(self) -> None:
        if self.run.time_scale != 1.0 and self.devices.backend != "sim":
            raise ConfigError("run.time_scale other than 1 needs devices.backend = \"sim\"")
        if not self.workloads:
            raise ConfigError("workloads must name at least one workload")
        names = [w.name for w in self.workloads]
        if len(set(names)) != len(names):
            raise ConfigError("workloads must not name the same workload twice")
        self._check_workload_args()
        if self.devices.backend == "sim":
            self._check_sim()
        if self.cluster.nodes > 1:
            self._check_cluster()

    def _check_cluster(self) -> None:
        c = self.cluster
        db = self.run.db or ""
        if not db.startswith("postgresql"):
            raise ConfigError(f"cluster.nodes = {c.nodes} needs one shared PostgreSQL store: set run.db (--db) to "
                              "postgresql+psycopg://USER@HOST/DB (SQLite is one machine's file)")
        if not self.run.id:
            raise ConfigError(f"cluster.nodes = {c.nodes}: every node must be given the same run.id (--run-id)")
        if not c.rendezvous:
            raise ConfigError(f"cluster.nodes = {c.nodes} needs cluster.rendezvous (--rendezvous HOST:PORT), "
                              "the address of node rank 0")
        if len(self.workloads) != 1:
            raise ConfigError("a cluster run trains one workload across its nodes (one rendezvous): give one "
                              "[[workloads]]")
        if c.node_rank is not None and c.node_rank >= c.nodes:
            raise ConfigError(f"cluster.node_rank must be 0..{c.nodes - 1}, got {c.node_rank}")

    def digest(self) -> str:
        """SHA-256 of the plan every node of a cluster run must share (node-local keys left out)."""
        import hashlib
        import json

        data = self.to_dict()
        for section, key in NODE_LOCAL_KEYS:
            data.get(section, {}).pop(key, None)
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()

    def _check_sim(self) -> None:
        # The simulated fleet is built after the run folder exists: check its specs now, as
        # the daemon will build it (its plog folder is always the run's plog/).
        from soak.telemetry.sim.config import SimConfig

        s = self.sim
        try:
            SimConfig.build(scenario=s.scenario or "healthy", fault=[s.fault] if s.fault else (),
                            family=s.family, chips=s.chips, seed=s.seed, plog_dir="plog")
        except UserError as exc:
            text = str(exc).replace("--chips ", "sim.chips ").replace("--family ", "sim.family ")
            raise ConfigError(text if text.startswith("sim.") else f"sim: {text}") from None

    def _check_workload_args(self) -> None:
        # Fault specs and each workload's extra options are checked with the workload's own
        # parser here, so a typo stops the plan before the run folder, the preflight and
        # torchrun exist (not as a failed run after minutes, or a restart loop).
        from soak.workloads.inject import parse_all
        from soak.workloads.launch import check_args

        for i, w in enumerate(self.workloads):
            try:
                specs = parse_all(self.faults.inject, w.name)
            except UserError as exc:
                raise ConfigError("faults.inject " + str(exc).removeprefix("--inject ")) from None
            for s in specs:  # it slows the link test between nodes: nothing to slow otherwise
                if s.kind == "slow-link" and (self.cluster.nodes < 2 or (s.node_rank or 0) >= self.cluster.nodes):
                    raise ConfigError(f"faults.inject {s.raw!r}: slow-link needs a cluster run with node rank "
                                      f"{s.node_rank} (cluster.nodes is {self.cluster.nodes})")
            try:
                check_args(w.name, ["--run-dir", ".", "--size", w.size, *w.extra])
            except UserError as exc:
                raise ConfigError(f"workloads[{i}].extra: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """The plan as TOML-shaped data (keys as in the file, durations in seconds)."""
        return _to_dict(self)


_SECTIONS: dict[str, type] = {
    f.name: f.default_factory().__class__  # type: ignore[misc]
    for f in fields(Plan)
    if f.name != "workloads"
}


def _build(cls: type, data: Any, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix} must be a table")
    by_key = {(f.metadata.get("key") or f.name): f for f in fields(cls)}
    unknown = sorted(set(data) - set(by_key))
    if unknown:
        raise ConfigError(f"{prefix}.{unknown[0]} is not a known key (known: {', '.join(sorted(by_key))})")
    kwargs = {}
    for key, value in data.items():
        f = by_key[key]
        kwargs[f.name] = f.metadata["parse"](value, f"{prefix}.{key}")
    return cls(**kwargs)


def plan_from_dict(data: Mapping[str, Any]) -> Plan:
    unknown = sorted(set(data) - set(_SECTIONS) - {"workloads"})
    if unknown:
        raise ConfigError(f"{unknown[0]} is not a known section (known: {', '.join(sorted([*_SECTIONS, 'workloads']))})")
    kwargs: dict[str, Any] = {}
    for name, cls in _SECTIONS.items():
        if name in data:
            kwargs[name] = _build(cls, data[name], name)
    if "workloads" in data:
        wl = data["workloads"]
        if not isinstance(wl, list):
            raise ConfigError("workloads must be an array of tables ([[workloads]])")
        kwargs["workloads"] = tuple(_build(WorkloadSpec, w, f"workloads[{i}]") for i, w in enumerate(wl))
    return Plan(**kwargs)


def read_plan_data(path: str | Path) -> dict[str, Any]:
    """A plan file's tables, not yet checked; a missing, unreadable or malformed file is one
    ``ConfigError`` line."""
    return read_toml(path, "plan", ConfigError)


def load_plan(path: str | Path) -> Plan:
    """Read a plan file; a missing or malformed file is one ``ConfigError`` line."""
    return plan_from_dict(read_plan_data(path))


def _to_dict(obj: Any) -> Any:
    if is_dataclass(obj):
        out = {}
        for f in fields(obj):
            out[f.metadata.get("key") or f.name] = _to_dict(getattr(obj, f.name))
        return out
    if isinstance(obj, tuple):
        return [_to_dict(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: _to_dict(v) for k, v in obj.items()}
    return obj


def recorded_plan(plan: Plan) -> dict[str, Any]:
    """The plan as soak writes it down (``plan.toml``, the run row, and so every report, the
    app and ``soak runs show``): ``to_dict`` with the password of every URL masked
    (``postgresql+psycopg://soak:***@db/soak``). The one place a plan is recorded: a password
    given in ``--db`` is used, never kept (a resume takes it from libpq's ``PGPASSWORD`` or
    password file, or ``--db-password-file``: soak.store.engine)."""
    return masked(plan.to_dict())


def dump_plan(plan: Plan) -> str:
    """The recorded plan as TOML (durations in seconds, empty strings for unset); reads back
    equal, but for the passwords ``recorded_plan`` masks."""
    data = recorded_plan(plan)
    lines: list[str] = []
    for section, values in data.items():
        if section == "workloads":
            continue
        lines.append(f"[{section}]")
        for k, v in values.items():
            lines.append(f"{k} = {toml_value('' if v is None else v)}")
        lines.append("")
    for w in data["workloads"]:
        lines.append("[[workloads]]")
        for k, v in w.items():
            lines.append(f"{k} = {toml_value(v)}")
        lines.append("")
    return "\n".join(lines)


def plan_units() -> dict[str, str]:
    """The unit of each plan key that has one, by dotted key (``run.duration`` -> ``s``,
    ``jobs.min_free`` -> ``bytes``): from the field's name, where the unit is written."""
    out = {}
    for name, cls in [*_SECTIONS.items(), ("workloads[]", WorkloadSpec)]:
        for f in fields(cls):
            unit = next((u for u in ("s", "bytes") if f.name.endswith(f"_{u}")), None)
            if unit is not None:
                out[f"{name}.{f.metadata.get('key') or f.name}"] = unit
    return out


def plan_reference() -> list[tuple[str, str, str]]:
    """(dotted key, default as written in TOML, doc) for every key: the docs' table."""
    out = []
    for name, cls in [*_SECTIONS.items(), ("workloads[]", WorkloadSpec)]:
        for f in fields(cls):
            key = f.metadata.get("key") or f.name
            raw = f.metadata.get("raw")
            if raw is MISSING:
                default = f.default if f.default is not MISSING else f.default_factory()
                raw = toml_value("" if default is None else default)
            else:
                raw = toml_value(raw)
            out.append((f"{name}.{key}", raw, f.metadata["doc"]))
    return out
