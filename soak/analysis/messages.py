"""The sentence of every coded decision: one template per code, in English here.

A finding, a criterion, a reason or an interruption carries a ``code`` and ``values`` (a flat
mapping of numbers, names, flags and lists of names); its English sentence is
``say(code, values)``, and another language renders the same pair with its own table
(``soak.report.i18n.CHINESE``). The codes are closed: every code a producer uses is a key of
``ENGLISH``, so a table for another language is checked for completeness against it.

A template is a ``str.format`` string over the values, with one addition for optional parts:
``[[key|text]]`` keeps ``text`` (itself a template) when ``values[key]`` is present (not None,
False, or an empty string or list), and ``[[!key|text]]`` when it is absent. A list value
is written as its items joined by ", " (``{x:semi}``: by "; ").

Named formats say what a value is, so that each language writes it its own way:
``{x:hm}`` a duration (``{x:hours}`` one given in hours), ``{x:pct}`` a fraction, ``{x:utc}`` a time, and the names of machine
keys ``{x:metric}``, ``{x:kind}``, ``{x:scope}``, ``{x:event}``, ``{x:cause}``,
``{x:node_status}``, ``{x:severity}``, ``{x:preflight}``, ``{x:unit}`` (a list: each item). Here they are written as they are;
the report passes its own (``say(..., formats=...)``).

Some sentences are made of parts (the nodes a criterion names, the stops of a restarts
reason): ``DERIVED`` makes those values from the typed ones with the ``part.*`` templates of
the same table, so every language composes them from its own words.
"""

from __future__ import annotations

import math
import re
import string
import time
from collections.abc import Callable, Mapping
from typing import Any

_PEERS_TAIL = "; {z:.1f} x the natural spread, confidence {confidence:.2f}"
_NODE = "node {node}[[members| ({members})]][[ranks| ({ranks} ranks)]]: "
_STRAGGLER = {
    "step_time_s": "{metric:metric} {change_pct:.1f}% slower than its {scope:scope} peers' {baseline_s:.4g} s for {duration_h:.1f} h",
    "compute_s": "{metric:metric} {change_pct:.1f}% slower than its {scope:scope} peers' {baseline_s:.4g} s for {duration_h:.1f} h",
    "busbw_gbps": ("{metric:metric} {change_pct:.1f}% lower than its {scope:scope} peers' {baseline_gbps:.1f} GB/s "
                   "for {duration_h:.1f} h"),
}
_NODE_CHIPS = "node {node}[[members| ({members})]][[chips| ({chips} chips)]]: "
_OUTLIER = {
    "temp_c": "{metric:metric} {deviation_c:+.1f} C off its {scope:scope} peers' {baseline_c:.1f} C for {duration_h:.1f} h "
              "at comparable power",
    "power_w": ("{metric:metric} {deviation_w:+.1f} W off its {scope:scope} peers' {baseline_w:.1f} W ({change_pct:+.1f}%) "
                "for {duration_h:.1f} h"),
    "util_pct": "{metric:metric} {deviation_pct:+.1f} % off its {scope:scope} peers' {baseline_pct:.1f} % for {duration_h:.1f} h",
    "hbm_used_bytes": ("{metric:metric} growth {deviation_mb:+.0f} MB off its {scope:scope} peers' {baseline_mb:.0f} MB "
                       "for {duration_h:.1f} h"),
}
# How far out of line a series is in its episodes (soak.analysis.recurring), per metric.
_EPISODE_DEVIATION = {
    "temp_c": "{deviation_c:+.1f} C off its {scope:scope} peers' {baseline_c:.1f} C at comparable power",
    "power_w": "{deviation_w:+.1f} W off its {scope:scope} peers' {baseline_w:.1f} W ({change_pct:+.1f}%)",
    "util_pct": "{deviation_pct:+.1f} % off its {scope:scope} peers' {baseline_pct:.1f} %",
    "hbm_used_bytes": "growth {deviation_mb:+.0f} MB off its {scope:scope} peers' {baseline_mb:.0f} MB",
    "step_time_s": "{change_pct:.1f}% slower than its {scope:scope} peers' {baseline_s:.4g} s",
    "compute_s": "{change_pct:.1f}% slower than its {scope:scope} peers' {baseline_s:.4g} s",
    "busbw_gbps": "{change_pct:.1f}% lower than its {scope:scope} peers' {baseline_gbps:.1f} GB/s",
}
_EPISODES = ("{metric:metric} {deviation} in {count} episodes of typically {typical_min:.0f} min"
             "[[period_min|, every {period_min:.0f} min]][[!period_min|, not periodic]], {share_pct:.0f}% of the run"
             "[[slowdown_pct|; the job's steps {slowdown_pct:+.1f}% slower in them: {lost_pct:.1f}% of the run's "
             "training time lost]]")
# tails.py: stalls beyond 1.5x the bucket median, against the peers' share
_TAILS = ("{metric:metric} stalls in {share_pct:.1f}% of its readings (its peers {peers_share_pct:.1f}%)"
          "[[stall_x|, to {stall_x:.2f}x its median]] for {duration_h:.1f} h"
          "[[cost_pct|; the job's steps take {step_in_stalls_s:.3g} s when they happen against "
          "{step_outside_s:.3g} s: {cost_pct:.1f}% more job time]]; confidence {confidence:.2f}")
_TAIL_METRICS = ("compute_s", "step_time_s")
_OUTLIER_KIND = ("temp_c", "power_w", "util_pct", "hbm_used_bytes")
_LINK_FLOOR = (", below the floor {floor_gbps:.3g} GB/s ({floor_share_pct:.0f}% of the expected "
               "{expected_gbps:g} GB/s for {chip})[[injected| (injected: {injected})]]")
_LINK_REL = (", {below_pct:.0f}% below {whom}, test by test"
             "[[others_median_gbps| (their median over all tests {others_median_gbps:.3g} GB/s)]]"
             "[[injected| (injected: {injected})]]")
_LINK_NODE = ("node {node}: its links' all-reduce busbw {busbw_gbps:.3g} GB/s (upper median of its {pairs} pair(s), "
              "median of {tests} test(s))")
# how a numerical finding was settled (soak.analysis.numerics): by a rerun, or not at all
_NUMERIC_CLASS = ("[[class_chip|; confirmed on rank {rank}'s chip]][[serial| (serial {serial})]]"
                  "[[class_transient|; did not recur on a rerun (transient)]][[transients|; {transients} transients on "
                  "this chip]][[class_everywhere|; recurs on every chip: the model's numerics, not a chip]]"
                  "[[unsettled|; no rank settled as its cause]]")
_LINK_PAIR = "link {node} - {other}: all-reduce busbw {busbw_gbps:.3g} GB/s (median of {tests} test(s))"
_MEMORY = ("{metric:metric} creeps {slope_mb_per_h:.1f} MB/h (90% CI {slope_low_mb_per_h:.1f}..{slope_high_mb_per_h:.1f}) "
           "since [[change_point|onset (change point)]][[!change_point|burn-in]]; +{growth_mb:.0f} MB over the fit; ")
_MEMORY_RESTARTS = ("{metric:metric} creeps {slope_mb_per_h:.1f} MB/h (90% CI {slope_low_mb_per_h:.1f}.."
                    "{slope_high_mb_per_h:.1f}) in each of {segments} runs between restarts ({rising} rising on their "
                    "own), each {growth_min_mb:.0f} to {growth_max_mb:.0f} MB up in {hours_min_h:.1f} to "
                    "{hours_max_h:.1f} h before a restart freed it; ")
_CREEP_PEERS = ("{metric:metric} creeps {slope_mb_per_h:.1f} MB/h in each of {segments} runs between restarts, "
                "{deviation_mb_per_h:+.1f} MB/h off its {scope:scope} peers' {baseline_mb_per_h:.1f} MB/h (limit "
                "{limit_mb_per_h:.1f}); each run {growth_min_mb:.0f} to {growth_max_mb:.0f} MB up before a restart "
                "freed it")
_UTIL = ("{count} utilization drops below {low_pct:g}% [[periodic|every {period_s:.0f} s (CV {cv:.2f})]]"
         "[[!periodic|not periodic]], mean {mean_duration_s:.0f} s, idle {idle_fraction:.1%}, ")
_HANG = "no progress for {duration_min:.0f} min[[ongoing| (ongoing)]]: "
_THROUGHPUT = ("step time up {change_pct:.1f}% (90% CI {change_low_pct:.1f}..{change_high_pct:.1f}) {how}: "
               "{baseline_ms:.1f} -> {final_ms:.1f} ms")

FINDINGS: dict[str, str] = {
    # memory.py
    "memory_creep.runs_out_within_required": _MEMORY + (
        "at this rate it runs out in {hours_to_exhaustion_h:hours} (within the required {required_h:hours})"),
    "memory_creep.runs_out_beyond_required": _MEMORY + (
        "at this rate it runs out in {hours_to_exhaustion_h:hours} (beyond the required {required_h:hours})"),
    "memory_creep.capacity_unknown": _MEMORY + "capacity unknown",
    # memory.py, a creep each restart resets (a sawtooth)
    "memory_creep.restarts.runs_out_within_required": _MEMORY_RESTARTS + (
        "at this rate it runs out {hours_to_exhaustion_h:.0f} h after a restart (within the required {required_h:g} h)"),
    "memory_creep.restarts.runs_out_beyond_required": _MEMORY_RESTARTS + (
        "at this rate it runs out {hours_to_exhaustion_h:.0f} h after a restart (beyond the required {required_h:g} h)"),
    "memory_creep.restarts.capacity_unknown": _MEMORY_RESTARTS + "capacity unknown",
    # utilization.py
    "utilization_dropouts.global": _UTIL + "on all chips at once ({shared_fraction:.0%} shared): a global stall such as data loading",
    "utilization_dropouts.device": _UTIL + "on this chip",
    "utilization_dropouts.explained": "{count} utilization drops during declared {phase:event} phases (expected)",
    # hang.py
    "hang.idle_hbm_held": _HANG + "utilization at ~0 while HBM stays allocated",
    "hang.heartbeats_stopped": _HANG + "progress heartbeats stopped while telemetry continued",
    "hang.no_progress": _HANG + "no progress (idle chip and no heartbeats)",
    # comm.py
    "comm_timeouts.rising": ("{metric:metric} rising: {last_third_count} in the last third vs {first_third_count} in the first "
                             "({ratio:.1f}x, p={p_value:.1e}), {total:.0f} in all"),
    "comm_timeouts.fatal": "fatal {metric:metric} +{increment:.0f}: a collective timed out and the job aborted",
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
    **{f"outlier.{m}": t + _PEERS_TAIL for m, t in _OUTLIER.items()},
    **{f"outlier.node.{m}": _NODE_CHIPS + t + _PEERS_TAIL for m, t in _OUTLIER.items()},
    "outlier.group.temp_c": ("nodes {members} ({nodes} nodes) together {deviation_c:+.1f} C off the other nodes' "
                             "{baseline_c:.1f} C at comparable power for {duration_h:.1f} h (the worst "
                             "{worst_c:+.1f} C): a facility cause, the cooling of their rack or row"),
    # creep_peers.py: HBM climbing faster than the peers' in every run between restarts
    "outlier.restarts.hbm_used_bytes": _CREEP_PEERS,
    "outlier.node.restarts.hbm_used_bytes": _NODE_CHIPS + _CREEP_PEERS,
    # recurring.py: out of line in episodes that come back
    **{f"{'outlier' if m in _OUTLIER_KIND else 'straggler'}.episodes.{m}": _EPISODES.replace("{deviation}", d)
       for m, d in _EPISODE_DEVIATION.items()},
    **{f"outlier.node.episodes.{m}": _NODE_CHIPS + _EPISODES.replace("{deviation}", d)
       for m, d in _EPISODE_DEVIATION.items() if m in _OUTLIER_KIND},
    **{f"straggler.node.episodes.{m}": _NODE + _EPISODES.replace("{deviation}", d)
       for m, d in _EPISODE_DEVIATION.items() if m not in _OUTLIER_KIND},
    **{f"straggler.{m}": t + _PEERS_TAIL for m, t in _STRAGGLER.items()},
    **{f"straggler.node.{m}": _NODE + t + _PEERS_TAIL for m, t in _STRAGGLER.items()},
    **{f"straggler.tail.{m}": _TAILS for m in _TAIL_METRICS},
    **{f"straggler.node.tail.{m}": _NODE + _TAILS for m in _TAIL_METRICS},
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
    # device_faults.py: the chip's own fault report
    "device_fault.fault_code": ("fault code {code} ([[unknown|unknown code]][[!unknown|{level}]])[[text|: {text}]]"
                                "[[action|; action: {action}]][[cleared| (cleared since)]]"),
    "device_fault.health": "the chip reported health {words}[[cleared| (OK again since)]]",
    "device_fault.ecc_uncorrectable": ("uncorrectable (double-bit) ECC errors [[previous|{previous:.0f}]][[!previous|0]]"
                                       " -> {value:.0f}"),
    "device_fault.ecc_isolated_double": ("double-bit isolated memory pages [[previous|{previous:.0f}]][[!previous|0]]"
                                         " -> {value:.0f}"),
    "device_fault.ecc_isolated_single": ("single-bit isolated memory pages [[previous|{previous:.0f}]][[!previous|0]]"
                                         " -> {value:.0f}"),
    "device_fault.ecc_correctable": ("{count:.0f} correctable ECC errors[[per_h| ({per_h:.1f}/h, limit {max_per_h:g}/h)]]"
                                     "[[peer_median|, over {peer_factor:g} x the chips' median {peer_median:.0f}]]"),
    "device_fault.link": ("network port [[seen_down|down {downs} time(s), longest {longest_down_s:.0f} s]][[still_down| "
                          "(still down)]][[!seen_down|never seen down]], {flaps} flap(s); limits {max_link_down_s:g} s down, "
                          "{max_link_flaps} flaps"),
    "device_fault.xid": ("Xid [[code|{code} ({level})]][[!code|of unknown number]][[text|: {text}]]"
                         "[[action|; action: {action}]]"),
    "device_fault.row_remap": "row remapping failed: the memory cannot retire a failing row",
    "device_fault.reset_pending": "a row remap or page retirement waits for a GPU reset",
    # numerics.py: the workloads' own numerical checks
    "sdc.mismatch": ("wrong result in the {check} check[[comparison| ({comparison})]][[step| at step {step}]]"
                     "[[error|: error {error:.3g}]][[tolerance|, tolerance {tolerance:g}]]; {count} time(s)" + _NUMERIC_CLASS),
    "nonfinite.value": ("non-finite {what:metric} ({value})[[step| at step {step}]]; {count} time(s)" + _NUMERIC_CLASS),
    "loss_spike.spike": ("loss[[loss| {loss:.4g}]][[step| at step {step}]][[multiple|, over {multiple:g} x]]"
                         "[[median| its recent median {median:.4g}]]; {count} time(s)" + _NUMERIC_CLASS),
    # stale.py: readings that stopped changing
    "stale_telemetry.frozen": ("{metric:metric} read {value:g} unchanged for {unchanged_h:.1f} h from {since:utc}"
                               "[[ongoing| (still)]] while {peers_moving} of its {peers} peers moved (their longest "
                               "unchanged stretch: median {peer_median_h:.2f} h): a stuck reading, left out of the "
                               "evidence"),
}
"""Finding codes (the part before the dot is the finding's kind)."""

SHARED_CODES = (
    "utilization_dropouts.global", "utilization_dropouts.device", "thermal.excursions", "thermal.drift",
    "thermal.throttled", "throughput_degradation.abrupt", "throughput_degradation.gradual",
    "memory_creep.runs_out_within_required", "memory_creep.runs_out_beyond_required",
    "memory_creep.capacity_unknown", "hang.idle_hbm_held", "hang.heartbeats_stopped", "hang.no_progress",
    "comm_timeouts.rising", "comm_timeouts.fatal",
    "memory_creep.restarts.runs_out_within_required", "memory_creep.restarts.runs_out_beyond_required",
    "memory_creep.restarts.capacity_unknown",
)
"""The codes a fault every chip of the job or of a node shares can give (``soak.analysis.shared``):
each has a ``CODE.shared`` sentence, the worst chip's with how many chips share it."""
_SHARED = "{shared_chips} chips[[shared_node| of node {shared_node}]] (the worst {shared_worst}): "
FINDINGS.update({f"{c}.shared": _SHARED + FINDINGS[c] for c in SHARED_CODES})

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
    "criterion.device_faults": "device faults",
    "criterion.numerics": "numerical correctness",
    # one per finding kind: the kinds are those of the finding codes above
    **{f"criterion.kind.{kind}": "no {kind:kind} (fail)"
       for kind in dict.fromkeys(code.split(".")[0] for code in FINDINGS)},
}
"""Criterion codes, with the criterion's name (``criterion.kind.*``: over its ``kind`` value)."""

_LINK_RULE = "no node or pair more than {max_below_median_pct:g}% below the others"
_COMPUTE_RULE = "no node more than {max_below_median_pct:g}% below the other nodes"
CRITERION_TEXTS: dict[str, str] = {
    "criterion.runtime.required": ">= {planned_s:hm} planned",
    "criterion.runtime.measured": "ran {ran_s:hm} of {planned_s:hm}, training {training_s:hm}",
    "criterion.runtime.required_record": "[[planned_s|>= {planned_s:hm}]][[!planned_s|N/A]]",
    "criterion.runtime.measured_record": "{ran_s:hm}",
    "criterion.availability.required": ">= {min_availability:pct} (start-up and injected faults excepted)",
    "criterion.availability.measured": ("{judged_availability:pct} of the time it ran, start-up and injected faults "
                                        "given back; [[was_down|{down_s:hm} down unexpectedly]][[!was_down|never down unexpectedly]]"
                                        "[[cause_counts| ({cause_counts})]]"),
    "criterion.longest_uninterrupted.required": "[[required_s|>= {required_s:hm}]][[!required_s|reported]]",
    "criterion.longest_uninterrupted.measured": "{longest_s:hm}",
    "criterion.restarts.required": "<= {limit} not injected",
    "criterion.restarts.measured": ("{uninjected} uninjected crash/hang"
                                    "[[has_injected|, {injected} injected (expected canary)]]"),
    "criterion.coverage.required": ">= {min_coverage:pct} of the soak, every chip and metric",
    "criterion.coverage.measured": ("lowest {lowest_ratio:pct} ({lowest_chip} {lowest_metric:metric}); "
                                    "{chips_seen} chips x {metrics} metrics"),
    "criterion.coverage.measured_missing": "{chips_seen} of {chips_expected} chips read",
    "criterion.coverage.measured_none": "no chip readings at all",
    "criterion.preflight.required": "pass",
    "criterion.preflight.measured": "[[status|{status:preflight}]][[!status|not recorded]]",
    "criterion.nodes.required": "all {expected} to the end",
    "criterion.nodes.measured": "{joined} of {expected} joined, {finished} finished[[bad|; {bad}]]",
    "criterion.links.required": (_LINK_RULE + "[[floor_gbps|; every pair >= {floor_gbps:.3g} GB/s ({chip}: expected "
                                 "{expected_gbps:g} GB/s)]][[relative_only| ({chip}: no expected figure, relative "
                                 "rule only)]]"),
    "criterion.links.measured": ("{pairs} pair(s) of {nodes} nodes in {tests} test(s): median {median_gbps:.3g} GB/s, "
                                 "lowest {lowest_a}-{lowest_b} {lowest_gbps:.3g} GB/s"
                                 "[[two_nodes| (two nodes: no other pair to compare with)]][[failing|; {failing}]]"),
    "criterion.links.measured_none": "no link test recorded: links not judged[[running| yet]]",
    "criterion.compute.required": (_COMPUTE_RULE + "[[floor_tflops|; every chip >= {floor_tflops:.3g} TFLOP/s ({chip}: "
                                   "dense 16-bit peak {expected_tflops:g}, {expected_source})]]"
                                   "[[!floor_tflops| ({chip_named}: no expected figure, relative rule only)]]"),
    "criterion.compute.measured": ("{ranks} rank(s) on {nodes} node(s): median {median_tflops:.3g} TFLOP/s, "
                                   "lowest {lowest_tflops:.3g}[[one_node| (one node: no other node to compare with)]]"
                                   "[[failing|; {failing}]]"),
    "criterion.device_faults.required": ("no chip-isolating fault code, uncorrectable ECC error, failed row remap or "
                                         "hardware Xid; each port down <= {max_link_down_s:g} s and <= "
                                         "{max_link_flaps} flaps[[min_reads|; each chip's fault views read >= "
                                         "{min_reads} times, once per {max_read_interval_s:hm} of the run or more "
                                         "often]]"),
    "criterion.device_faults.measured": ("fault reports of {read} of {chips} chips read ({readings} readings): "
                                         "[[failing|{fails} failing]][[!failing|none failing]][[warning|, {warns} warning(s)]]"
                                         "[[not_read|; not read: {not_read}]]"),
    "criterion.device_faults.measured_none": ("no chip's fault report (health, ECC) was read: not judged"
                                              "[[failing|; {fails} failing fault(s) seen]]"),
    "criterion.numerics.required": ("no confirmed wrong result, NaN or Inf on any chip (a transient twice on one "
                                    "chip fails it); every chip's results checked"),
    "criterion.numerics.measured": ("{checks} check(s) on {checked} of {chips} chip(s)[[steps_last|, steps "
                                    "{steps_first}-{steps_last}]] ({per_chip}): [[failing|{fails} failing]]"
                                    "[[!failing|none failing]][[warning|, {warns} warning(s)]]"
                                    "[[not_checked|; not judged on {not_checked}: no check reached them]]"),
    "criterion.numerics.measured_none": ("no numerical check ran: not judged[[failing|; {fails} failing "
                                         "finding(s) seen]]"),
    "criterion.device_faults.measured_cadence": ("not judged: fault views read once per {read_interval_s:hm} of the "
                                                 "run ({most_reads} read(s) of a chip at most), needs once per "
                                                 "{max_read_interval_s:hm} or less[[failing|; {fails} failing "
                                                 "fault(s) seen]]"),
    "criterion.kind.required": "0 fail[[shortest_s| (seen from {shortest_s:hm} long at this sampling)]]",
    "criterion.kind.measured": ("[[found|{findings} finding(s)]][[fails|: {fails} failing, {warns} warning, "
                                "{infos} explained or informational]][[!found|0]]"
                                "[[not_judged|; not judged on {not_judged} (stale readings)]]"),
    "criterion.kind.measured_blind": ("not judged: one [[steps|step row]][[!steps|reading]] per {interval_s:hm}, "
                                      "needs one per "
                                      "{max_interval_s:hm} or less[[found|; {findings} finding(s)]]"),
}
"""A criterion's required and measured lines (``required_code`` and ``measured_code`` of a
criterion, over the criterion's ``values``)."""

PARTS: dict[str, str] = {
    "part.where_node": "node {node}",
    "part.where_node_device": "{node}/{device}",
    "part.where_device": "{device}",
    "part.where_job": "the job",
    "part.link_pair": "{node}-{other}",
    "part.node_status": "{node} {status:node_status}",
    "part.node_problem": "node {node} (rank {rank}) {status:node_status}[[came_back| (came back later)]]",
    "part.never_joined": "{count} node(s) never joined",
    "part.not_finished": "{count} node(s) did not finish",
    "part.cause_count": "{count} [[injected|injected ]]{cause:cause}",
    "part.low_coverage": "{chip} {metric} {ratio:pct}",
    "part.lost": "{cause:cause} {seconds:hm}",
    "part.chip_checks": "{chip} {checks}",
}
"""Parts of sentences, composed by ``DERIVED``."""

NODE_REASONS: dict[str, str] = {
    "node.status": "node {status:node_status}[[came_back| (came back later)]]",
    "node.preflight": "preflight {status:preflight}",
    "node.finding": "{kind:kind}[[device| {device}]] ({severity:severity}): {summary}",
    "node.unread": "{unread} of {chips} chips never read",
    "node.chips": "{fail} chip(s) fail, {warn} with warnings: {names}[[more| (+{more})]]",
}
"""Why a node of a cluster run has its verdict (``soak.analysis.chip_verdicts``)."""

STATEMENTS: dict[str, str] = {
    "statement.no_data": "no chip data: the run demonstrates nothing about the failure rate",
    "statement.clean": ("0 failures in {hours_text} {unit:unit}: with 95% confidence the failure rate is below "
                        "{bound_per_h:.2e} per {per:unit} (-ln(0.05)/T, about 3/T), i.e. a mean time between failures "
                        "above {mtbf_text} {unit:unit}[[cpu|; counted: host CPU, no accelerator]]"),
    "statement.failures": ("{n_fail} failing finding(s) in {hours_text} {unit:unit}: observed rate {rate_per_h:.2e} "
                           "per {per:unit}, 95% upper bound {bound_per_h:.2e} (exact Poisson)"
                           "[[cpu|; counted: host CPU, no accelerator]]"),
}
"""The clean-run statement: what the run shows about the failure rate."""

REASONS: dict[str, str] = {
    "reason.finding": "{severity_label} {kind:kind} on {where} from {start:utc}: {summary}",
    "reason.no_findings": "no failing or warning findings",
    "reason.no_data": "the trace holds no data: nothing was shown",
    "reason.runtime_short": "runtime: the run ended after {ran_s:hm} of its planned {planned_s:hm}",
    "reason.no_training": "availability: no workload trained during the run",
    "reason.availability": ("availability: {down_s:hm} without training ({causes:cause}); "
                            "{judged_availability:pct} < {min_availability:pct}"),
    "reason.longest_uninterrupted": "longest uninterrupted training {longest_s:hm} < {required_s:hm}",
    "reason.restarts": "restarts: {stops:semi}[[more| (+{more} more)]]",
    "reason.no_chip_read": "evidence: no chip was read during the run[[reader_errors| (reader errors: {reader_errors:semi})]]",
    "reason.chips_missing": ("evidence: only {chips_seen} of {chips_expected} expected chips were read"
                             "[[reader_errors| (reader errors: {reader_errors:semi})]]"),
    "reason.coverage_low": ("evidence: readings cover less than {min_coverage:pct} on {chips} chip(s): {low}"
                            "[[more| ...]][[reader_errors| (reader errors: {reader_errors:semi})]]"),
    "reason.preflight": "preflight: {message}",
    "reason.nodes": "nodes: {problems:semi}",
    "reason.compute": "compute: {summaries:semi}[[more| ...]]",
    "reason.run_failed": "run failed: [[why|{why}]][[!why|the workloads stopped before the planned end]]",
    "reason.run_stopped": "run stopped before its planned end[[why| ({why})]]: not judged",
    "reason.blind": ("{kind:kind} cannot be judged at one [[steps|step row]][[!steps|reading]] per {interval_s:hm}: "
                     "needs one per "
                     "{max_interval_s:hm} or less"),
}
"""Reason codes: a reason in a verdict says why it is not a pass (or that nothing was found)."""

INTERRUPTIONS: dict[str, str] = {
    "interruption.startup": "{workload} start-up",
    "interruption.crash": "crash of {workload}[[message|: {message}]]",
    "interruption.hang": "hang of {workload}[[message|: {message}]]",
    "interruption.daemon_down": "the daemon was down",
    "interruption.stopped": "stopped",
    "interruption.gave_up": "{workload} gave up",
    "interruption.node_lost": "the job lost a node[[message|: {message}]]",
}
"""Interruption codes: ``interruption.<cause>`` (``soak.analysis.evidence``)."""

RELIABILITY: dict[str, str] = {
    "reliability.ettr": ("effective training time ratio (ETTR) [[ettr|{ettr:pct}]][[!ettr|N/A]]: trained {productive_s:hm} of the {planned_s:hm} "
                         "planned[[injected_s|, less {injected_s:hm} of {injected_count} injected canary fault(s) (their "
                         "interruptions and the work redone after them), which never count against the machine]]; {lost_total_s:hm} lost[[lost| ({lost})]]"),
    "reliability.failures": ("{failures} unexpected failure(s) of the machine in {node_hours:.3g} node-hours "
                             "({crash} crash, {hang} hang, {node_lost} node lost[[link|, {link} link failure]], {device_fault} device fault[[sdc|, {sdc} chip(s) computing wrong]])"
                             "[[node_mttf_h|: mean time to failure per node {node_mttf_h:.3g} h]]"),
    "reliability.overhead": ("the job was up {training_s:hm}, of which {overhead_s:hm} did not train: {overhead}; "
                             "productive {productive_s:hm}"),
    "reliability.mttf_lower": ("mean time to failure per node >= {node_mttf_h_lower90:.3g} h with 90% confidence "
                               "(2T / χ²(0.90; {dof}) = {two_t:.3g} / {chi2:.3f}, T = {node_hours:.3g} node-hours)"),
    "reliability.projection": ("a job over {nodes} node(s)[[this_cluster| (this cluster)]]: mean time to failure "
                               ">= {mttf_h_lower90:.3g} h with 90% confidence"),
    "reliability.meaning": ("a lower bound, not a forecast: {node_hours:.3g} node-hours with {failures} failure(s) can "
                            "show no more than a mean time to failure above {node_mttf_h_lower90:.3g} h per node; "
                            "a longer run or more nodes is the only way to show more"),
    "reliability.repeat_offender": "node {node} failed in {runs} runs of the store: {run_ids}[[more| (+{more})]]",
    "reliability.no_repeat_offender": "no node of this run failed in two or more runs of the store",
}
"""The reliability section: ETTR, failures and the MTTF bound (``soak.analysis.reliability``)."""

ENGLISH: dict[str, str] = {**FINDINGS, **CRITERIA, **CRITERION_TEXTS, **PARTS, **REASONS, **NODE_REASONS, **STATEMENTS,
                           **INTERRUPTIONS, **RELIABILITY}
"""Every code, with its English template."""

Sub = Callable[[str, Mapping[str, Any]], str]
"""Renders another code of the same table (a part of a sentence)."""


def _where(v: Mapping[str, Any], sub: Sub) -> str:
    """The chip, rank or node a finding is about (``soak.analysis.verdict.where``)."""
    node, device = v.get("node"), v.get("device")
    if node is None:
        if device is None:  # the whole job's (a fault its chips share, a group of nodes)
            return sub("part.where_job", {})
        return sub("part.where_device", {"device": device})
    return sub("part.where_node", v) if device is None else sub("part.where_node_device", v)


def _named(names: list[str], most: int = 6) -> str:
    """The first ``most`` of the names a criterion's measured line gives, then "..."."""
    return ", ".join(names[:most]) + (" ..." if len(names) > most else "")


def _cause_counts(v: Mapping[str, Any], sub: Sub) -> list[str]:
    return [sub("part.cause_count", {"count": n, "injected": inj, "cause": c})
            for n, inj, c in zip(v.get("count_n") or [], v.get("count_injected") or [], v.get("count_causes") or [],
                                 strict=True)]


def _finding_said(v: Mapping[str, Any], sub: Sub) -> str:
    """The finding a reason names, said in the same language (its summary as judged when it
    has no code)."""
    code = v.get("finding_code")
    return sub(code, v["finding_values"]) if code and v.get("finding_values") else str(v.get("summary") or "")


def _reason_finding(v: Mapping[str, Any], sub: Sub) -> dict[str, Any]:
    return {"where": _where(v, sub), "summary": _finding_said(v, sub)}


def _node_problems(v: Mapping[str, Any], sub: Sub) -> dict[str, Any]:
    back = set(v.get("came_back") or [])
    out = [sub("part.node_problem", {"node": n, "rank": r, "status": st, "came_back": n in back})
           for n, r, st in zip(v.get("nodes") or [], v.get("ranks") or [], v.get("statuses") or [], strict=True)]
    if v.get("never_joined"):
        out.append(sub("part.never_joined", {"count": v["never_joined"]}))
    if v.get("not_finished"):
        out.append(sub("part.not_finished", {"count": v["not_finished"]}))
    return {"problems": out}


def _failing_links(v: Mapping[str, Any], sub: Sub) -> dict[str, Any]:
    names = [sub("part.where_node", {"node": n}) if o is None else sub("part.link_pair", {"node": n, "other": o})
             for n, o in zip(v.get("failing_nodes") or [], v.get("failing_others") or [], strict=True)]
    return {"failing": _named(names)}


def _failing_compute(v: Mapping[str, Any], sub: Sub) -> dict[str, Any]:
    names = [_where({"node": n or "?", "device": d} if d is None else {"node": n, "device": d}, sub)
             for n, d in zip(v.get("failing_nodes") or [], v.get("failing_devices") or [], strict=True)]
    return {"failing": _named(names)}


DERIVED: dict[str, Callable[[Mapping[str, Any], Sub], dict[str, Any]]] = {
    "reason.finding": _reason_finding,
    "node.finding": lambda v, sub: {"summary": _finding_said(v, sub)},
    "reason.restarts": lambda v, sub: {"stops": [
        sub(c, {"workload": w, "message": m}) for c, w, m in zip(v.get("stop_codes") or [], v.get("workloads") or [],
                                                                  v.get("messages") or [], strict=True)]},
    "reason.coverage_low": lambda v, sub: {"low": ", ".join(
        sub("part.low_coverage", {"chip": c, "metric": m, "ratio": r})
        for c, m, r in zip(v.get("low_chips") or [], v.get("low_metrics") or [], v.get("low_ratios") or [],
                           strict=True))},
    "reason.nodes": _node_problems,
    "reason.compute": lambda v, sub: {"summaries": [
        sub(c, fv) for c, fv in zip(v.get("finding_codes") or [], v.get("finding_values") or [], strict=True)]},
    # "was_down": no time down is said in words, never as a "0 s" figure
    "criterion.availability.measured": lambda v, sub: {"cause_counts": ", ".join(_cause_counts(v, sub)),
                                                       "was_down": bool(v.get("down_s"))},
    "criterion.nodes.measured": lambda v, sub: {"bad": ", ".join(
        sub("part.node_status", {"node": n, "status": st})
        for n, st in zip(v.get("bad_nodes") or [], v.get("bad_statuses") or [], strict=True))},
    "reliability.ettr": lambda v, sub: {"lost": ", ".join(
        sub("part.lost", {"cause": c, "seconds": x}) for c, x in zip(v.get("lost_causes") or [], v.get("lost_seconds") or [],
                                                                     strict=True))},
    "reliability.overhead": lambda v, sub: {"overhead": ", ".join(
        sub("part.lost", {"cause": c, "seconds": x})
        for c, x in zip(v.get("overhead_causes") or [], v.get("overhead_seconds") or [], strict=True))},
    "criterion.links.measured": _failing_links,
    "criterion.compute.measured": _failing_compute,
    "criterion.numerics.measured": lambda v, sub: {"per_chip": ", ".join(
        sub("part.chip_checks", {"chip": c, "checks": n})
        for c, n in zip(v.get("checked_chips") or [], v.get("chip_checks") or [], strict=True))},
    # the bound's two numbers as its formula names them: 2T and the chi-square quantile
    "reliability.mttf_lower": lambda v, sub: {
        "two_t": None if v.get("node_hours") is None else 2.0 * float(v["node_hours"]),
        "chi2": None if v.get("divisor") is None else 2.0 * float(v["divisor"])},
}
"""Values made of parts, from the typed ones: code -> function(values, sub) -> values to add."""


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


def said(code: str, values: Mapping[str, Any]) -> Said:
    """The English sentence of ``code`` over ``values``, keeping both."""
    return Said(say(code, values), code, values)


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
    """The one way a duration is written, on every page, in the app and the terminal:
    "6 h 47 min", "47 min", seconds only below a minute ("42 s"); N/A when unknown.

    Rounded down: a signed statement never says more time than was measured (7 h 13 min 50 s
    is "7 h 13 min" everywhere, never 7 h 14 min on another page)."""
    if seconds is None or isinstance(seconds, bool) or not math.isfinite(float(seconds)):
        return "N/A"
    if seconds < 0:
        return "-" + hm(-seconds)
    s = int(math.floor(float(seconds) + 1e-6))  # 419.9999999 of float sums is 7 min, not 6 min
    if s < 60:
        return f"{s} s"
    h, m = divmod(s // 60, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min"


def pct(share: float | None) -> str:
    """The one way a share (0-1) is written: a percentage with one decimal, "84.8 %"; N/A
    when unknown. Rounded down, so 99.96 % is never shown as 100.0 %."""
    if share is None or isinstance(share, bool) or not math.isfinite(float(share)):
        return "N/A"
    tenths = math.floor(1000 * float(share) + 1e-6)  # 0.848 is 84.8 %, not 84.7 % of its float
    return f"{tenths / 10:.1f} %"


def utc(ts: float) -> str:
    """Unix seconds as a UTC time stamp."""
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ts))


Formats = Mapping[str, Callable[[Any], str]]
"""Named formats: spec -> function of one value (a list is formatted item by item)."""

NAMES: tuple[str, ...] = ("metric", "kind", "scope", "event", "cause", "node_status", "severity", "preflight",
                         "unit")
"""The named formats that write the name of a machine key (here: the key as it is)."""

def hours(h: float | None) -> str:
    """A duration given in hours, written as ``hm`` writes one (rounded down: 3.52 h is
    "3 h 31 min", never "4 h", which would say more time is left than there is)."""
    return hm(None if h is None or isinstance(h, bool) else float(h) * 3600.0)


ENGLISH_FORMATS: Formats = {"hm": hm, "pct": pct, "utc": utc, "hours": hours, **{n: str for n in NAMES}}
"""The named formats of ``say``'s English."""

_JOINS = {"semi": "; "}
_ZERO = re.compile(r"-0(?:\.0*)?%?")


class _Formatter(string.Formatter):
    def __init__(self, formats: Formats) -> None:
        super().__init__()
        self.formats = formats

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec in self.formats:
            fn = self.formats[format_spec]
            if isinstance(value, list | tuple):
                return ", ".join(fn(v) for v in value)
            return fn(value)
        if isinstance(value, list | tuple):
            return _JOINS.get(format_spec, ", ").join(str(v) for v in value)
        text = super().format_field(value, format_spec)
        if isinstance(value, float) and value < 0 and format_spec.endswith(("f", "%")) and _ZERO.fullmatch(text):
            # a small negative rounded to nothing is written as zero: "-0.0 MB/h" says a sign it has not
            return super().format_field(0.0, format_spec)
        return text


def render(template: str, values: Mapping[str, Any], formats: Formats = ENGLISH_FORMATS) -> str:
    """``template`` (this module's syntax) filled from ``values``."""
    text = _OPTIONAL.sub(lambda m: m.group(3) if present(values.get(m.group(2))) != bool(m.group(1)) else "",
                         template)
    return _Formatter(formats).vformat(text, (), dict(values))


def say(code: str, values: Mapping[str, Any], table: Mapping[str, str] = ENGLISH,
        formats: Formats = ENGLISH_FORMATS) -> str:
    """The sentence of ``code`` with ``values`` in ``table``'s language (English by default),
    its names written by ``formats``; KeyError for an unknown code."""
    template = table[code]
    derive = DERIVED.get(code)
    if derive is not None:
        values = {**values, **derive(values, lambda c, v: say(c, v, table, formats))}
    return render(template, values, formats)
