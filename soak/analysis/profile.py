"""Acceptance profile: detector thresholds, which finding kinds fail, and expected phases.

A profile is a TOML file; every key is optional and defaults to :meth:`Profile.default`.
Unknown keys are errors naming the dotted key, so a typo never silently loosens a test::

    name = "site-a"
    required_runtime_h = 168          # a leak that exhausts memory sooner fails
    [severity]                        # highest severity each kind may reach
    utilization_dropouts = "warn"
    [thermal]
    threshold_c = 90
    [[phases]]                        # expected periodic phases: reported, not failed
    name = "checkpoint"
    every_s = 3600
    duration_s = 120
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from soak.analysis.model import KINDS, SEVERITIES
from soak.errors import ConfigError, InputError
from soak.tomlfile import finite, read_toml, toml_key, toml_value


@dataclass(frozen=True)
class Phase:
    """An expected phase during which the chips legitimately idle or slow down.

    Either periodic (``every_s`` apart, lasting about ``duration_s``, offset unknown and
    found from the data) or a list of explicit ``windows`` (from the run's events).
    """

    name: str
    every_s: float | None = None
    duration_s: float | None = None
    windows: tuple[tuple[float, float], ...] = ()

    @classmethod
    def parse(cls, spec: str) -> Phase:
        """``NAME:EVERY_S,DUR_S`` (e.g. ``checkpoint:3600,60``)."""
        try:
            name, rest = spec.split(":", 1)
            every, dur = (float(x) for x in rest.split(","))
        except ValueError:
            raise InputError(
                f"--phase {spec!r}: expected NAME:EVERY_S,DUR_S, e.g. checkpoint:3600,60"
            ) from None
        if not name or every <= 0 or dur <= 0 or dur >= every:
            raise InputError(f"--phase {spec!r}: need a name and 0 < DUR_S < EVERY_S")
        return cls(name=name, every_s=every, duration_s=dur)


@dataclass(frozen=True)
class MemoryParams:
    envelope_window_s: float = 600.0  # >= 2x the allocator sawtooth period
    burn_in_h: float = 1.0  # burn-in is max(burn_in_h, burn_in_frac x run)
    burn_in_frac: float = 0.25
    ci: float = 0.90
    rss_min_slope_bytes_per_h: float = 5e6  # tau for host RSS
    hbm_min_slope_bytes_per_h: float = 5e6  # tau for HBM: max(this, frac x capacity)
    hbm_min_slope_frac_per_h: float = 0.0001  # 6.9 MB/h on 64 GiB: a 12 MB/h leak is found in 24 h
    min_fit_points: int = 12
    onset_min_gain: float = 0.5  # hinge fit must cut the residual spread by this share
    # Creep across restarts (a sawtooth): a restart frees the memory, so each run between
    # restarts is fitted on its own and their slopes are pooled. A block whose minimum falls
    # below this share of its neighbours' is a restart where the run's events name none.
    restart_drop_frac: float = 0.5
    segments_min: int = 3  # fewer runs between restarts: the last regime alone is judged
    segment_min_points: int = 6  # envelope blocks after a run's burn-in for it to count
    segments_rising_share: float = 0.8  # share of the runs whose own slope is positive


@dataclass(frozen=True)
class UtilizationParams:
    low_pct: float = 5.0
    min_duration_s: float = 10.0
    merge_gap_s: float = 3.0
    min_events: int = 8  # fewer random dips look periodic by chance too often
    max_cv: float = 0.15
    share_tol: float = 0.25
    min_share: float = 0.60
    # Periodic only if random dips at the same rate look this periodic less often: at 1e-4
    # about 1 chip in 30,000 with 11 random dips a day still passes, at 1e-5 none in 200,000.
    max_p: float = 1e-5
    max_idle_fraction: float = 0.02  # non-periodic drops fail above this share of time
    global_min_share: float = 0.8  # share of devices dropping together = global stall


@dataclass(frozen=True)
class HangParams:
    threshold_s: float = 300.0
    hbm_held_frac: float = 0.10  # HBM above this share of its busy median = still held


@dataclass(frozen=True)
class CommParams:
    bucket_s: float = 600.0
    alpha: float = 0.01  # Bonferroni-split across counters
    min_ratio: float = 2.0
    min_count: int = 5
    rate_counters: tuple[str, ...] = ("comm_timeouts_total",)
    fatal_counters: tuple[str, ...] = ("comm_fatal_timeouts_total",)


@dataclass(frozen=True)
class ThermalParams:
    threshold_c: float = 85.0
    hysteresis_c: float = 2.0
    min_duration_s: float = 60.0
    drift_min_c_per_h: float = 0.1
    drift_min_hours: float = 48.0  # from two days on a 24 h moving average removes the daily cycle
    drift_short_min_hours: float = 20.0  # shorter runs: a daily harmonic is fitted with the trend
    drift_short_min_c_per_h: float = 0.15  # tau below 48 h; 0.3 C/h is found in 24 h
    drift_max_power_pct_per_h: float = 0.2  # a rise with power rising faster is load, not cooling
    throttle_mask: int = 0x08 | 0x20 | 0x40 | 0x80  # HW slowdown, SW/HW thermal, power brake
    throttle_min_s: float = 60.0
    # Severity policy: a drift fails when it took the chip this far up beyond its peers' own
    # rise over the run (first to last hourly median, at unchanged power): a chip that much
    # hotter than chips doing the same work is a cooling defect that throttles it; less warns.
    drift_fail_c: float = 10.0


@dataclass(frozen=True)
class ThroughputParams:
    delta_pct: float = 5.0  # smallest abrupt slowdown that matters
    cusum_h: float = 20.0  # alarm level, in units of delta (x block minutes)
    block_s: float = 60.0
    baseline_start_h: float = 0.5
    baseline_len_h: float = 2.0
    confirm_s: float = 1800.0
    gradual_min_pct_per_h: float = 0.2
    fail_pct: float = 10.0  # slowdowns below this are warnings
    bootstrap: int = 300


@dataclass(frozen=True)
class PeersParams:
    """Peer comparison (``outlier``, ``straggler``): chips of one model doing the same work."""

    bucket_s: float = 600.0  # time-aligned buckets; each chip's median per bucket
    min_peers: int = 3  # fewer peers than this (on the node, else in the cluster): not compared
    k_sigma: float = 3.5  # out of line: beyond k x the natural spread (1.4826 MAD across chips) ...
    min_duration_s: float = 7200.0  # ... and the metric's floor, for at least this long
    min_share: float = 0.8  # of the buckets of that stretch
    min_confidence: float = 0.95  # sign test on hourly medians over the stretches: a cycle is no outlier
    idle_util_pct: float = 5.0  # a chip below this in a bucket is idle there: not compared
    power_tol_frac: float = 0.10  # temperature compared only while power is this close to the peers'
    temp_min_c: float = 4.5  # hotter than the peers at comparable power
    # a whole node hotter than the other nodes: its median over its chips is far less noisy
    # than one chip, so its floor is lower than a chip's; the natural spread of the node
    # medians (rack and inlet) sets the limit above it
    node_temp_min_c: float = 5.0
    power_min_frac: float = 0.15  # chips of one bin differ by several % in power
    util_min_pct: float = 10.0
    hbm_growth_min_frac: float = 0.02  # HBM growth since burn-in beyond the peers', share of capacity
    step_min_frac: float = 0.05  # straggler: step time this much above the peers (SuperBench: 5 %)
    bw_min_frac: float = 0.05  # straggler: collective bandwidth this much below the peers
    # Severity policy: a rank or node this much slower fails (for fail_min_s): under synchronous
    # data parallelism the whole job runs at its pace, so a 10 % straggler costs 10 % of the
    # cluster's throughput for as long as it is in it. Anchors: SuperBench fails a node 5 %
    # off its baseline in acceptance; NVIDIA's resiliency extension flags a rank at 75 % of
    # its peers' speed; MindCluster's slow-node detection flags a 30 % degradation. Below: warn.
    straggler_fail_frac: float = 0.10
    outlier_severity: str = "warn"  # severity of an outlier (info | warn | fail)
    # A short stretch is reported when it is large: every bucket beyond this many times the
    # limit, for at least large_min_s and three buckets (what lets the online analysis name
    # a big fault early).
    large_factor: float = 2.0
    large_min_s: float = 1800.0
    # Recurring episodes (soak.analysis.recurring): out of line in short episodes that come
    # back. At least episodes_min_count of them, and either episodes_many, or covering
    # episodes_min_share of the compared buckets, or periodic.
    episodes_min_count: int = 3
    episodes_many: int = 6
    episodes_min_share: float = 0.10
    # Tails (soak.analysis.tails): the share of a rank's readings beyond 1.5x its bucket
    # median over the last tail_window_s, out of line by at least tail_min_share; a stall
    # finding warns, and fails when it costs tail_fail_cost_frac of the job's time.
    tail_min_share: float = 0.02
    tail_window_s: float = 7200.0
    tail_fail_cost_frac: float = 0.10  # the straggler line: stalls that cost the job this share of its time fail
    # Severity policy, the rest of it. A chip (or a whole node, or a group of nodes) this much
    # hotter than its peers at comparable power fails, for fail_min_s: 10 C is what separates a
    # cooling defect (a fan, a blocked inlet, paste) from the spread of healthy parts, and it
    # eats the margin to the throttle point; less is an outlier that only looks odd (warn).
    temp_fail_c: float = 10.0
    fail_min_s: float = 3600.0  # a straggler or a hot chip fails only when it lasts this long
    # A whole node against the other nodes on temperature: k for its limit, and the spread it
    # is measured by is the other nodes' (the node judged does not widen its own limit), at
    # least the node's own chips' disagreement over the square root of their number. 3.5 as
    # for a chip: at 3, a healthy 8-node cluster whose nodes' ambient swings out of phase named
    # a node 8 C above the others for 6 h (3.2 x the spread); in the halls the 5 C floor sets
    # the limit, and the 7 C node is found in the same 11 of 12 halls at 3 and at 3.5.
    node_k_sigma: float = 3.5
    # Nodes out of line together on temperature are one finding of the group (a facility
    # cause: a rack's or a row's cooling), from this many nodes.
    group_min_nodes: int = 2


@dataclass(frozen=True)
class LinksParams:
    """The pairwise link test between nodes (``links`` criterion, docs/cluster.md)."""

    min_expected_frac: float = 0.75  # absolute floor: a pair below this share of its chip model's figure fails
    max_below_median_frac: float = 0.20  # relative rule: a node or pair this far below the others fails


@dataclass(frozen=True)
class ComputeParams:
    """The GEMM rate per chip and node (``compute`` criterion, soak.analysis.compute)."""

    min_expected_frac: float = 0.5  # absolute floor: a rank below this share of its chip's 16-bit peak fails
    max_below_median_frac: float = 0.10  # relative rule: a node this far below the other nodes fails


@dataclass(frozen=True)
class FaultsParams:
    """The chip's own fault reports (``device faults`` criterion, soak.analysis.device_faults).

    Fault codes and Xids are judged by their level in the fault-code table (soak.faultcodes);
    uncorrectable ECC errors, double-bit isolated pages and failed row remaps always fail."""

    max_link_down_s: float = 60.0  # a network port down longer than this (run time line) fails
    max_link_flaps: int = 2  # more downs-and-ups of a port than this in the run fail; fewer warn
    correctable_max_per_h: float = 10.0  # correctable ECC errors per hour above this warn
    correctable_peer_factor: float = 10.0  # ... as do more than this x the chips' median count
    correctable_peer_min: int = 20  # ... once the chip has at least this many
    # the sampling the criterion needs: each chip's fault views read this many times at least
    # (a counter's rise shows between two reads), once per this much of the run or more often
    min_reads: int = 2
    max_read_interval_s: float = 1800.0


@dataclass(frozen=True)
class StaleParams:
    """Readings that stopped changing (``stale_telemetry``, soak.analysis.stale): a series whose
    longest run of identical readings is this long and this many times the peers' median
    longest run, while most of its peers moved, is not evidence."""

    min_unchanged_s: float = 3600.0  # never stale below this (run time line)
    peer_factor: float = 10.0  # ... nor below this x the peers' median longest unchanged run
    min_readings: int = 10  # readings in the unchanged run
    min_peers: int = 2  # peers of the same metric needed to judge at all
    min_peers_moving_frac: float = 0.75  # share of the peers that changed while it held still
    counter_quiet_moves: float = 15.0  # a counter: as long as its peers take to move this many times


@dataclass(frozen=True)
class ChipExpectation:
    """What one chip model should reach, each figure with where it comes from.

    ``pair_busbw_gbps`` is the link test's measure: an all-reduce between one rank on each of
    two nodes, busbw as nccl-tests defines it (= algbw for two ranks). None: no fixed figure,
    only the relative rule judges. ``tflops_16bit``: dense FP16/BF16 peak of one chip (as
    ``npu-smi``/``nvidia-smi`` lists chips), for the compute checks.
    """

    pair_busbw_gbps: float | None = None
    pair_busbw_source: str = ""
    tflops_16bit: float | None = None
    tflops_source: str = ""


# Figures are understated where uncertain, and say so: the absolute floor must never fail a
# healthy machine because of a figure we could not verify.
DEFAULT_CHIPS: dict[str, ChipExpectation] = {
    "910B": ChipExpectation(
        20.0, "Atlas 800T A2: one 200GE RoCE port per NPU (25 GB/s line rate); 80 % of line rate, "
        "not verified on hardware here: understated",
        256.0, "FP16 dense; published figures for the 910B bins range from 256 to about 376 TFLOPS "
        "(third-party listings, no Huawei datasheet per bin): the lowest is used"),
    "910_93": ChipExpectation(
        20.0, "Atlas A3 (910_93, each die one chip): across SuperPoDs the dies talk over RoCE; "
        "Huawei publishes no per-die figure we could verify: the 910B's understated figure is used",
        256.0, "FP16 dense per die; no verified per-die datasheet figure: the 910B's lowest is used"),
    "310P": ChipExpectation(
        None, "inference card without a chip-to-network RDMA port: nodes talk over the host NIC, "
        "no fixed figure (relative rule only)",
        70.0, "Atlas 300I Pro (one 310P3): FP16 70 TFLOPS, INT8 140 TOPS (Huawei product page); "
        "no BF16"),
    "H100": ChipExpectation(
        40.0, "HGX/DGX H100: one 400 Gb/s ConnectX-7 NIC per GPU (50 GB/s line rate); nccl-tests "
        "busbw approaches line rate for large messages (nccl-tests doc/PERFORMANCE.md); 80 % used",
        989.0, "NVIDIA H100 SXM datasheet: BF16 1,979 TFLOPS with sparsity, half without"),
    "H200": ChipExpectation(
        40.0, "HGX H200: one 400 Gb/s ConnectX-7 NIC per GPU (50 GB/s line rate), as H100; 80 % used",
        989.0, "NVIDIA H200 SXM datasheet: BF16 1,979 TFLOPS with sparsity, half without (H100's compute)"),
    "CPU": ChipExpectation(
        None, "gloo over the host network: no fixed figure (relative rule only)",
        None, "host CPU: no fixed figure"),
}


def chip_model(name: str | None, backend: str | None = None) -> str | None:
    """The profile's chip model of a device name (``Ascend910B2``, ``NVIDIA H100 80GB HBM3``,
    ``Ascend910_9391``) or backend (``cpu``); None when unknown."""
    if (backend or "").lower() == "cpu":
        return "CPU"
    text = (name or "").upper().replace(" ", "")
    for key in ("910_93", "910B", "310P", "H200", "H100"):
        if key in text:
            return key
    return None


def chip_of(manifest: Mapping[str, Any] | None, backend: str | None) -> str | None:
    """The profile's chip model of a run from its manifest (the first named NPU card or GPU)."""
    if (backend or "").lower() == "cpu":
        return chip_model(None, backend)
    m = manifest or {}
    for section, key in (("npu", "cards"), ("nvidia", "gpus")):
        for item in (m.get(section) or {}).get(key) or []:
            model = chip_model(str(item.get("name") or "")) if isinstance(item, Mapping) else None
            if model:
                return model
    return None


@dataclass(frozen=True)
class EvidenceParams:
    """What a run must show before its findings can mean anything (docs/report.md)."""

    min_coverage: float = 0.95  # share of the soak every chip and metric has readings for
    min_availability: float = 0.95  # share of the run spent training (start-up, injected faults excepted)
    max_uninjected_restarts: int = 0  # crashes and hangs the plan did not inject
    min_uninterrupted_h: float = 0.0  # longest stretch of training required; 0: reported only
    # the burn-in clock (soak.daemon.burnin): the run ends only after min_uninterrupted_h hours
    # without an unexpected failure since the last one, at most max_duration_h from its start
    restart_clock_on_failure: bool = False
    max_duration_h: float = 0.0  # 0: the plan's duration, the clock cannot extend the run


_DEFAULT_SEVERITY = {k: "fail" for k in KINDS}

SEVERITY_POLICY: tuple[tuple[str, str, str, str], ...] = (
    ("fail", "a rank or node straggler_fail_frac (10 %) or more slower than its peers for fail_min_s (1 h) or more",
     "under synchronous data parallelism the whole job runs at its pace: a 10 % straggler costs 10 % of the "
     "cluster's throughput for as long as it is in it",
     "SuperBench fails a node 5 % off its baseline in acceptance; NVIDIA's resiliency extension flags a rank at "
     "75 % of its peers' speed; MindCluster's slow-node detection flags a 30 % degradation"),
    ("fail", "a chip or a whole node temp_fail_c (10 C) or more above its peers at comparable power for fail_min_s "
     "(1 h) or more, or drifting up drift_fail_c (10 C) beyond its peers' own rise at unchanged power",
     "a cooling defect (a fan, a blocked inlet, paste): it eats the margin to the throttle point, and a throttled "
     "chip is a straggler",
     "the peer floor (temp_min_c 4.5 C) is the spread of healthy parts; 10 C is more than twice it"),
    ("fail", "a group of nodes out of line together by that much: one finding of the group (outlier.group.temp_c)",
     "a facility cause (the cooling of a rack or row): the customer's hall, not the chips, and named as such",
     "as the line above"),
    ("fail", "the hardware's and the job's own facts: a fault code or uncorrectable ECC, a throttle flag, an "
     "excursion above thermal.threshold_c, a hang, memory that runs out within required_runtime_h, the job's "
     "step time throughput.fail_pct (10 %) slower, stalls that cost tail_fail_cost_frac (10 %) of its time",
     "each stops or slows the customer's job",
     "the straggler line for time lost; the vendor's own fault levels (soak.faultcodes)"),
    ("warn", "what only looks odd: an outlier below those lines (power, utilization, HBM growth, a chip hotter by "
     "less), a straggler below 10 %, a drift its peers share or a smaller one",
     "worth a look, not a cost the customer bears: peers.outlier_severity", "-"),
)
"""The severity policy of the default profile: (level, what, why, anchor). The thresholds
named are this profile's keys; ``to_toml`` writes the policy at the head of the file."""


@dataclass(frozen=True)
class Profile:
    name: str = "default"
    required_runtime_h: float = 168.0
    severity: dict[str, str] = field(default_factory=lambda: dict(_DEFAULT_SEVERITY))
    phases: tuple[Phase, ...] = ()
    memory: MemoryParams = MemoryParams()
    utilization: UtilizationParams = UtilizationParams()
    hang: HangParams = HangParams()
    comm: CommParams = CommParams()
    thermal: ThermalParams = ThermalParams()
    throughput: ThroughputParams = ThroughputParams()
    peers: PeersParams = PeersParams()
    evidence: EvidenceParams = EvidenceParams()
    links: LinksParams = LinksParams()
    compute: ComputeParams = ComputeParams()
    faults: FaultsParams = FaultsParams()
    chips: dict[str, ChipExpectation] = field(default_factory=lambda: dict(DEFAULT_CHIPS))
    stale: StaleParams = StaleParams()

    @classmethod
    def default(cls) -> Profile:
        return cls()

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Profile:
        name = os.fspath(path)
        return cls.from_dict(read_toml(name, "profile", InputError), source=name)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<profile>") -> Profile:
        kwargs: dict[str, Any] = {}
        sections = _SECTIONS
        for key, value in data.items():
            if key in sections:
                if not isinstance(value, dict):
                    raise ConfigError(f"{source}: {key} must be a table")
                kwargs[key] = _section(sections[key], value, f"{source}: {key}")
            elif key == "name":
                kwargs["name"] = str(value)
            elif key == "required_runtime_h":
                kwargs[key] = _number(value, f"{source}: {key}")
            elif key == "severity":
                sev = dict(_DEFAULT_SEVERITY)
                if not isinstance(value, dict):
                    raise ConfigError(f"{source}: severity must be a table of kind = level")
                for kind, level in value.items():
                    if kind not in KINDS:
                        raise ConfigError(f"{source}: severity.{kind}: unknown finding kind")
                    if level not in SEVERITIES:
                        raise ConfigError(
                            f"{source}: severity.{kind}: must be one of {', '.join(SEVERITIES)}"
                        )
                    sev[kind] = level
                kwargs["severity"] = sev
            elif key == "chips":
                kwargs["chips"] = _chips(value, f"{source}: chips")
            elif key == "phases":
                if not isinstance(value, list):
                    raise ConfigError(f"{source}: phases must be an array of tables")
                kwargs["phases"] = tuple(_phase(p, f"{source}: phases[{i}]") for i, p in enumerate(value))
            else:
                raise ConfigError(f"{source}: {key}: unknown key")
        return cls(**kwargs)

    def with_phases(self, phases: list[Phase] | tuple[Phase, ...]) -> Profile:
        return dataclasses.replace(self, phases=tuple(self.phases) + tuple(phases))

    def cap(self, kind: str, severity: str) -> str:
        """Lower ``severity`` to the most this profile allows for ``kind``."""
        limit = self.severity.get(kind, "fail")
        return severity if SEVERITIES.index(severity) <= SEVERITIES.index(limit) else limit

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_toml(self) -> str:
        """This profile as the TOML file :meth:`from_toml` reads back equal (every key written,
        so the file says every threshold, not only those that differ from the defaults).

        A phase of explicit windows comes from a run's events, not from a profile file, and
        has no TOML form: it is refused rather than dropped."""
        lines = ["# Severity policy: what costs the customer fails, what only looks odd warns."]
        for level, what, why, anchor in SEVERITY_POLICY:
            lines += [f"# {level}: {what}", f"#   why: {why}", *([f"#   anchor: {anchor}"] if anchor != "-" else [])]
        lines += [f"name = {toml_value(self.name)}", f"required_runtime_h = {toml_value(self.required_runtime_h)}", ""]
        lines += ["[severity]", *(f"{toml_key(k)} = {toml_value(v)}" for k, v in self.severity.items()), ""]
        for name in _SECTIONS:
            lines.append(f"[{name}]")
            lines += [f"{k} = {toml_value(v)}" for k, v in dataclasses.asdict(getattr(self, name)).items()]
            lines.append("")
        for model, chip in self.chips.items():
            lines.append(f"[chips.{toml_key(model)}]")
            # no figure (None) is the key left out: TOML has no null, and the reader's default is None
            lines += [f"{k} = {toml_value(v)}" for k, v in dataclasses.asdict(chip).items() if v is not None]
            lines.append("")
        for phase in self.phases:
            if phase.windows or phase.every_s is None or phase.duration_s is None:
                raise ValueError(f"phase {phase.name!r}: explicit windows have no profile file form")
            lines += ["[[phases]]", f"name = {toml_value(phase.name)}", f"every_s = {toml_value(phase.every_s)}",
                      f"duration_s = {toml_value(phase.duration_s)}", ""]
        return "\n".join(lines)


# the profile's tables of detector parameters, by their TOML name
_SECTIONS: dict[str, type] = {
    "memory": MemoryParams,
    "utilization": UtilizationParams,
    "hang": HangParams,
    "comm": CommParams,
    "thermal": ThermalParams,
    "throughput": ThroughputParams,
    "peers": PeersParams,
    "evidence": EvidenceParams,
    "links": LinksParams,
    "compute": ComputeParams,
    "faults": FaultsParams,
    "stale": StaleParams,
}


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not finite(value):
        raise ConfigError(f"{where}: must be a number")
    return float(value)


def _section(cls: type, values: dict[str, Any], where: str) -> Any:
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"{where}.{key}: unknown key")
        default = getattr(cls(), key)
        if isinstance(default, bool):
            # a plan's acceptance.thresholds carry numbers: 1 and 0 say true and false there
            if not isinstance(value, bool) and value not in (0, 1):
                raise ConfigError(f"{where}.{key}: must be true or false")
            kwargs[key] = bool(value)
        elif key.endswith("_severity"):
            if value not in SEVERITIES:
                raise ConfigError(f"{where}.{key}: must be one of {', '.join(SEVERITIES)}")
            kwargs[key] = value
        elif isinstance(default, tuple):
            if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
                raise ConfigError(f"{where}.{key}: must be a list of metric names")
            kwargs[key] = tuple(value)
        elif isinstance(default, int) and not isinstance(default, bool):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{where}.{key}: must be an integer")
            kwargs[key] = value
        else:
            kwargs[key] = _number(value, f"{where}.{key}")
    return cls(**kwargs)


def _chips(value: Any, where: str) -> dict[str, ChipExpectation]:
    """``[chips.MODEL]`` tables laid over the defaults; a figure given needs its source."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table of chip models")
    out = dict(DEFAULT_CHIPS)
    known = {f.name for f in dataclasses.fields(ChipExpectation)}
    for model, table in value.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{where}.{model} must be a table")
        kw: dict[str, Any] = {}
        for key, v in table.items():
            if key not in known:
                raise ConfigError(f"{where}.{model}.{key}: unknown key")
            kw[key] = str(v) if key.endswith("_source") else _number(v, f"{where}.{model}.{key}")
        for figure, src in (("pair_busbw_gbps", "pair_busbw_source"), ("tflops_16bit", "tflops_source")):
            if figure in kw and not kw.get(src):
                raise ConfigError(f"{where}.{model}.{src}: a figure needs its source")
        base = out.get(str(model), ChipExpectation())
        out[str(model)] = dataclasses.replace(base, **kw)
    return out


def _phase(value: Any, where: str) -> Phase:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be a table with name, every_s, duration_s")
    unknown = set(value) - {"name", "every_s", "duration_s"}
    if unknown:
        raise ConfigError(f"{where}.{sorted(unknown)[0]}: unknown key")
    try:
        name = str(value["name"])
        every = _number(value["every_s"], f"{where}.every_s")
        dur = _number(value["duration_s"], f"{where}.duration_s")
    except KeyError as exc:
        raise ConfigError(f"{where}.{exc.args[0]}: missing") from None
    if every <= 0 or dur <= 0 or dur >= every:
        raise ConfigError(f"{where}: need 0 < duration_s < every_s")
    return Phase(name=name, every_s=every, duration_s=dur)
