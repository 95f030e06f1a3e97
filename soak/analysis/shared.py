"""One finding per fault: what every chip of the job, or of a node, shares is named once.

A cluster-wide stall (a data loader, a storage hiccup) makes every chip drop at the same
moments; a hall whose air warms makes every chip drift; a hang stops every rank. Each chip's
detector names it on its own chip, and 128 identical findings say one thing 128 times. So,
after the detectors: findings of the same code on chips of the same trace, out of line at
overlapping times, become one finding

* of the **job** (``node`` and ``device`` None, or ``node`` alone when every chip is on one
  node) when they are on ``utilization.global_min_share`` of the job's chips or more;
* of a **node** (``device`` None) when they are on every chip of that node (two or more).

The merged finding keeps the worst chip's sentence and figures (its code with ``.shared``
appended) and adds how many chips share it (``shared_chips``) and the worst ones by name
(``shared_worst``, a few); ``details.members`` lists every chip. Its severity is the worst
of theirs. Peer findings are not merged: a peer comparison is against the others, and a
fault a node's chips share is already one node finding there (``outlier.node.*``).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

from soak.analysis.messages import SHARED_CODES, say
from soak.analysis.model import SEVERITIES, Finding
from soak.analysis.profile import Profile
from soak.analysis.trace import Trace
from soak.device_names import device_key

WORST = 3  # the chips a merged finding names


def chips_of(trace: Trace) -> dict[str | None, set[str]]:
    """Per node (None: a single-node trace), the chips with readings (host rows left out)."""
    out: dict[str | None, set[str]] = defaultdict(set)
    for s in trace.series("util_pct"):
        node, dev = trace.place(s.device)
        out[node].add(dev)
    for s in trace.series("step_time_s"):
        node, dev = trace.place(s.device)
        out[node].add(dev)
    return out


def merge(findings: list[Finding], trace: Trace, profile: Profile) -> list[Finding]:
    """``findings`` (placed on their nodes) with each fault the job's or a node's chips share
    named once."""
    chips = chips_of(trace)
    total = sum(len(v) for v in chips.values())
    groups: dict[str, list[Finding]] = defaultdict(list)
    out: list[Finding] = []
    for f in findings:
        if f.code in SHARED_CODES and f.device is not None and f.severity != "info":
            groups[f.code].append(f)
        else:
            out.append(f)
    for members in groups.values():
        together = _overlapping(members)
        rest = [f for f in members if f not in together]
        if total >= 2 and len(together) >= max(2, math.ceil(profile.utilization.global_min_share * total)):
            nodes = {f.node for f in together}
            out.append(_merged(together, nodes.pop() if len(nodes) == 1 else None))
            out.extend(rest)
            continue
        by_node: dict[str | None, list[Finding]] = defaultdict(list)
        for f in together:
            by_node[f.node].append(f)
        for node, fs in by_node.items():
            whole = node is not None and len(chips.get(node, ())) >= 2 and {f.device for f in fs} >= chips[node]
            if whole:
                out.append(_merged(fs, node))
            else:
                out.extend(fs)
        out.extend(rest)
    return out


def _overlapping(members: list[Finding]) -> list[Finding]:
    """The findings out of line at the same time as most of them: overlapping the median
    finding's window."""
    starts = sorted(f.start for f in members)
    ends = sorted(f.end for f in members)
    a, b = starts[len(starts) // 2], ends[len(ends) // 2]
    return [f for f in members if f.start <= b and f.end >= a]


def _size(f: Finding) -> float:
    """How bad one chip's finding is, to rank the chips by (severity first)."""
    v = f.values or {}
    for x in (f.slope_per_hour, f.deviation, v.get("change_pct"), v.get("peak_c"), v.get("idle_fraction"),
              v.get("duration_min"), f.count):
        if isinstance(x, int | float) and math.isfinite(x):
            return abs(float(x))
    return 0.0


def _merged(fs: list[Finding], node: str | None) -> Finding:
    ranked = sorted(fs, key=lambda f: (-SEVERITIES.index(f.severity), -_size(f), f.node or "", f.device or ""))
    worst = ranked[0]
    names = [device_key(f.node, f.device) if f.node is not None else str(f.device) for f in ranked]
    values = {**worst.values, "shared_chips": len(fs), "shared_worst": names[:WORST], "shared_node": node}
    code = f"{worst.code}.shared"
    onsets = [f.onset for f in fs if f.onset is not None]
    return dataclasses.replace(
        worst, device=None, node=node, start=min(f.start for f in fs), end=max(f.end for f in fs),
        onset=min(onsets) if onsets else None, code=code, values=values, summary=say(code, values),
        details={**worst.details, "shared_by": len(fs), "members": sorted(names), "worst": names[:WORST],
                 "worst_details_of": names[0]})


def merge_nodes(findings: list[Finding], nodes: int, profile: Profile) -> list[Finding]:
    """A cluster leader's step: the nodes' own findings of a fault their chips share
    (``CODE.shared``, one per node) become one finding of the job when they are on
    ``utilization.global_min_share`` of the ``nodes`` or more, at overlapping times."""
    groups: dict[str, list[Finding]] = defaultdict(list)
    out: list[Finding] = []
    for f in findings:
        if f.code.endswith(".shared") and f.device is None and f.node is not None:
            groups[f.code].append(f)
        else:
            out.append(f)
    for members in groups.values():
        together = _overlapping(members)
        if nodes >= 2 and len(together) >= max(2, math.ceil(profile.utilization.global_min_share * nodes)):
            ranked = sorted(together, key=lambda f: (-SEVERITIES.index(f.severity), -_size(f), f.node or ""))
            worst = ranked[0]
            names = [n for f in ranked for n in (f.values.get("shared_worst") or [])]
            values = {**worst.values, "shared_chips": sum(int(f.values.get("shared_chips") or 0) for f in together),
                      "shared_worst": names[:WORST], "shared_node": None}
            out.append(dataclasses.replace(
                worst, node=None, start=min(f.start for f in together), end=max(f.end for f in together),
                values=values, summary=say(worst.code, values),
                details={**worst.details, "shared_by": values["shared_chips"],
                         "members": sorted(m for f in together for m in f.details.get("members") or []),
                         "nodes": sorted(str(f.node) for f in together)}))
            out.extend(f for f in members if f not in together)
        else:
            out.extend(members)
    return out
