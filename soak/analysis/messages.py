"""The English sentence of every coded decision: one template per code.

A finding, a criterion, a reason or an interruption carries a ``code`` and ``values`` (a flat
mapping of numbers, names, flags and lists of names); its English sentence is
``say(code, values)``, and another language renders the same pair with its own table. The
codes are closed: every code a producer uses is a key of ``ENGLISH``, so a table for another
language can be checked for completeness against it.

A template is a ``str.format`` string over the values, with one addition for optional parts:
``[[key|text]]`` keeps ``text`` (itself a template) when ``values[key]`` is present (not None,
False, or an empty string or list), and ``[[!key|text]]`` when it is absent. A list value
is written as its items joined by ", ".
"""

from __future__ import annotations

import re
import string
import time
from collections.abc import Mapping
from typing import Any

_PEERS_TAIL = "; {z:.1f} x the natural spread, confidence {confidence:.2f}"
_NODE = "node {node}[[members| ({members})]][[ranks| ({ranks} ranks)]]: "
_STRAGGLER = {
    "step_time_s": "step_time_s {change_pct:.1f}% slower than its {scope} peers' {baseline_s:.4g} s for {duration_h:.1f} h",
    "compute_s": "compute_s {change_pct:.1f}% slower than its {scope} peers' {baseline_s:.4g} s for {duration_h:.1f} h",
    "busbw_gbps": ("busbw_gbps {change_pct:.1f}% lower than its {scope} peers' {baseline_gbps:.1f} GB/s "
                   "for {duration_h:.1f} h"),
}
_LINK_FLOOR = (", below the floor {floor_gbps:.3g} GB/s ({floor_share_pct:.0f}% of the expected "
               "{expected_gbps:g} GB/s for {chip})[[injected| (injected: {injected})]]")
_LINK_REL = (", {below_pct:.0f}% below {whom}, test by test"
             "[[others_median_gbps| (their median over all tests {others_median_gbps:.3g} GB/s)]]"
             "[[injected| (injected: {injected})]]")
_LINK_NODE = ("node {node}: its links' all-reduce busbw {busbw_gbps:.3g} GB/s (upper median of its {pairs} pair(s), "
              "median of {tests} test(s))")
_LINK_PAIR = "link {node} - {other}: all-reduce busbw {busbw_gbps:.3g} GB/s (median of {tests} test(s))"
_MEMORY = ("{metric} creeps {slope_mb_per_h:.1f} MB/h (90% CI {slope_low_mb_per_h:.1f}..{slope_high_mb_per_h:.1f}) "
           "since [[change_point|onset (change point)]][[!change_point|burn-in]]; +{growth_mb:.0f} MB over the fit; ")
_UTIL = ("{count} utilization drops below {low_pct:g}% [[periodic|every {period_s:.0f} s (CV {cv:.2f})]]"
         "[[!periodic|not periodic]], mean {mean_duration_s:.0f} s, idle {idle_fraction:.1%}, ")
_HANG = "no progress for {duration_min:.0f} min[[ongoing| (ongoing)]]: "
_THROUGHPUT = ("step time up {change_pct:.1f}% (90% CI {change_low_pct:.1f}..{change_high_pct:.1f}) {how}: "
               "{baseline_ms:.1f} -> {final_ms:.1f} ms")

FINDINGS: dict[str, str] = {
    # memory.py
    "memory_creep.runs_out_within_required": _MEMORY + (
        "at this rate it runs out in {hours_to_exhaustion_h:.0f} h (within the required {required_h:g} h)"),
    "memory_creep.runs_out_beyond_required": _MEMORY + (
        "at this rate it runs out in {hours_to_exhaustion_h:.0f} h (beyond the required {required_h:g} h)"),
    "memory_creep.capacity_unknown": _MEMORY + "capacity unknown",
    # utilization.py
    "utilization_dropouts.global": _UTIL + "on all chips at once ({shared_fraction:.0%} shared): a global stall such as data loading",
    "utilization_dropouts.device": _UTIL + "on this chip",
    "utilization_dropouts.explained": "{count} utilization drops during declared {phase} phases (expected)",
    # hang.py
    "hang.idle_hbm_held": _HANG + "utilization at ~0 while HBM stays allocated",
    "hang.heartbeats_stopped": _HANG + "progress heartbeats stopped while telemetry continued",
    "hang.no_progress": _HANG + "no progress (idle chip and no heartbeats)",
    # comm.py
    "comm_timeouts.rising": ("{metric} rising: {last_third_count} in the last third vs {first_third_count} in the first "
                             "({ratio:.1f}x, p={p_value:.1e}), {total:.0f} in all"),
    "comm_timeouts.fatal": "fatal {metric} +{increment:.0f}: a collective timed out and the job aborted",
    # thermal.py
    "thermal.excursions": ("{count} excursion(s) above {threshold_c:g} C, {total_min:.1f} min in all, "
                           "peak {peak_c:.1f} C"),
    "thermal.drift": ("temperature drifts up {slope_c_per_h:.2f} C/h (90% CI {slope_low_c_per_h:.2f}.."
                      "{slope_high_c_per_h:.2f})[[power_trend_pct_per_h| at unchanged power "
                      "({power_trend_pct_per_h:+.2f} %/h)]], {first_c:.1f} -> {last_c:.1f} C (hourly medians); "
                      "+{per_day_c:.1f} C a day at this rate"),
    "thermal.throttled": "clocks throttled for {duration_min:.1f} min: {reasons}",
    # throughput.py
    "throughput_degradation.abrupt": _THROUGHPUT.replace("{how}", "abruptly"),
    "throughput_degradation.gradual": _THROUGHPUT.replace("{how}", "gradually ({slope_pct_per_h:.2f} %/h)"),
    # peers.py: a chip or rank out of line with its peers
    "outlier.temp_c": ("temp_c {deviation_c:+.1f} C off its {scope} peers' {baseline_c:.1f} C for {duration_h:.1f} h "
                       "at comparable power" + _PEERS_TAIL),
    "outlier.power_w": ("power_w {deviation_w:+.1f} W off its {scope} peers' {baseline_w:.1f} W ({change_pct:+.1f}%) "
                        "for {duration_h:.1f} h" + _PEERS_TAIL),
    "outlier.util_pct": ("util_pct {deviation_pct:+.1f} % off its {scope} peers' {baseline_pct:.1f} % "
                         "for {duration_h:.1f} h" + _PEERS_TAIL),
    "outlier.hbm_used_bytes": ("hbm_used_bytes growth {deviation_mb:+.0f} MB off its {scope} peers' {baseline_mb:.0f} MB "
                               "for {duration_h:.1f} h" + _PEERS_TAIL),
    **{f"straggler.{m}": t + _PEERS_TAIL for m, t in _STRAGGLER.items()},
    **{f"straggler.node.{m}": _NODE + t + _PEERS_TAIL for m, t in _STRAGGLER.items()},
    # compute.py
    "straggler.node_compute": ("node {node}: GEMM rate {tflops:.3g} TFLOP/s (median of its {ranks} rank(s)), "
                               "{below_pct:.0f}% below the other nodes' median {others_median_tflops:.3g} TFLOP/s"),
    "straggler.rank_compute_floor": ("{rank}: GEMM rate {tflops:.3g} TFLOP/s over the run, below the floor "
                                     "{floor_tflops:.3g} ({floor_share_pct:.0f}% of the {chip} dense 16-bit peak "
                                     "{expected_tflops:g})"),
    # links.py
    "straggler.link_node": _LINK_NODE + _LINK_REL.replace("{whom}", "the pairs without it"),
    "straggler.link_node_floor": _LINK_NODE + _LINK_FLOOR,
    "straggler.link_pair": _LINK_PAIR + _LINK_REL.replace("{whom}", "the other pairs"),
    "straggler.link_pair_floor": _LINK_PAIR + _LINK_FLOOR,
}
"""Finding codes (the part before the dot is the finding's kind)."""

CRITERIA: dict[str, str] = {
    "criterion.runtime": "runtime",
    "criterion.availability": "availability",
    "criterion.longest_uninterrupted": "longest uninterrupted",
    "criterion.restarts": "crashes and hangs",
    "criterion.coverage": "evidence coverage",
    "criterion.preflight": "preflight",
    "criterion.nodes": "nodes",
    "criterion.links": "links",
    "criterion.compute": "compute",
    **{f"criterion.kind.{kind}": f"no {kind} (fail)" for kind in (
        "memory_creep", "utilization_dropouts", "hang", "comm_timeouts", "thermal", "throughput_degradation",
        "outlier", "straggler")},
}
"""Criterion codes, with the criterion's English name (its required and measured lines are
still written by ``soak.criteria``; their values are in the criterion's ``values``)."""

REASONS: dict[str, str] = {
    "reason.finding": "{severity_label} {kind} on {where} from {start:utc}: {summary}",
    "reason.no_findings": "no failing or warning findings",
    "reason.no_data": "the trace holds no data: nothing was shown",
    "reason.runtime_short": "runtime: the run ended after {ran_s:hm} of its planned {planned_s:hm}",
    "reason.no_training": "availability: no workload trained during the run",
    "reason.availability": ("availability: {down_s:hm} without training ({causes}); "
                            "{judged_availability:pct} < {min_availability:pct}"),
    "reason.longest_uninterrupted": "longest uninterrupted training {longest_s:hm} < {required_s:hm}",
    "reason.restarts": "restarts: {stops}[[more| (+{more} more)]]",
    "reason.no_chip_read": "evidence: no chip was read during the run[[reader_errors| (reader errors: {reader_errors})]]",
    "reason.chips_missing": ("evidence: only {chips_seen} of {chips_expected} expected chips were read"
                             "[[reader_errors| (reader errors: {reader_errors})]]"),
    "reason.coverage_low": ("evidence: readings cover less than {min_coverage:pct} on {chips} chip(s): {low}"
                            "[[more| ...]][[reader_errors| (reader errors: {reader_errors})]]"),
    "reason.preflight": "preflight: {message}",
    "reason.nodes": "nodes: {problems}",
    "reason.compute": "compute: {summaries}[[more| ...]]",
    "reason.run_failed": "run failed: [[why|{why}]][[!why|the workloads stopped before the planned end]]",
    "reason.run_stopped": "run stopped before its planned end[[why| ({why})]]: not judged",
}
"""Reason codes: a reason in a verdict says why it is not a pass (or that nothing was found)."""

INTERRUPTIONS: dict[str, str] = {
    "interruption.startup": "{workload} start-up",
    "interruption.crash": "crash of {workload}[[message|: {message}]]",
    "interruption.hang": "hang of {workload}[[message|: {message}]]",
    "interruption.daemon_down": "the daemon was down",
    "interruption.stopped": "stopped",
    "interruption.gave_up": "{workload} gave up",
}
"""Interruption codes: ``interruption.<cause>`` (``soak.analysis.evidence``)."""

ENGLISH: dict[str, str] = {**FINDINGS, **CRITERIA, **REASONS, **INTERRUPTIONS}
"""Every code, with its English template."""


class Said(str):
    """A sentence that keeps the ``code`` and ``values`` it says (a ``str`` to every reader
    that wants the words)."""

    code: str
    values: dict[str, Any]

    def __new__(cls, text: str, code: str, values: Mapping[str, Any]) -> Said:
        if code not in ENGLISH:
            raise KeyError(f"unknown code {code!r}")
        out = super().__new__(cls, text)
        out.code = code
        out.values = dict(values)
        return out


def typed(sentences: Any) -> list[dict[str, Any]]:
    """``code`` and ``values`` of each sentence (a plain string: code "", no values)."""
    return [{"code": getattr(s, "code", ""), "values": dict(getattr(s, "values", {}))} for s in sentences]

_OPTIONAL = re.compile(r"\[\[(!?)(\w+)\|((?:[^\[\]]|\[(?!\[))*?)\]\]")


def present(value: Any) -> bool:
    """Whether an optional part keyed by ``value`` is said: not None, False, "" or []."""
    if value is None or value is False:
        return False
    return not (isinstance(value, str | list | tuple) and len(value) == 0)


def hm(seconds: float | None) -> str:
    """A duration as people read it (``1d 2h 3m``, ``4m 5s``); N/A when unknown."""
    if seconds is None:
        return "N/A"
    s = int(round(seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h {m}m"
    if h:
        return f"{h}h {m}m"
    return f"{m}m {s}s" if m else f"{s}s"


def pct(x: float | None) -> str:
    """A fraction as a percentage with one decimal; N/A when unknown."""
    return "N/A" if x is None else f"{100 * x:.1f}%"


def utc(ts: float) -> str:
    """Unix seconds as a UTC time stamp."""
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ts))


_NAMED_FORMATS = {"hm": hm, "pct": pct, "utc": utc}
"""Format specs beyond ``str.format``'s: ``{x:hm}`` a duration, ``{x:pct}`` a fraction, ``{x:utc}`` a time."""


class _Formatter(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec in _NAMED_FORMATS:
            return _NAMED_FORMATS[format_spec](value)
        if isinstance(value, list | tuple):
            return ", ".join(str(v) for v in value)
        return super().format_field(value, format_spec)


_FORMAT = _Formatter()


def render(template: str, values: Mapping[str, Any]) -> str:
    """``template`` (this module's syntax) filled from ``values``."""
    text = _OPTIONAL.sub(lambda m: m.group(3) if present(values.get(m.group(2))) != bool(m.group(1)) else "",
                         template)
    return _FORMAT.vformat(text, (), dict(values))


def say(code: str, values: Mapping[str, Any], table: Mapping[str, str] = ENGLISH) -> str:
    """The sentence of ``code`` with ``values`` (English by default); KeyError for an unknown code."""
    return render(table[code], values)
