"""What an event says, read from what was recorded with it: a code and the values of its message.

The daemon, the supervisor, the cluster membership and the workloads write each event's
``message`` in English and, in its ``detail``, the values that message was made from. The
English report shows the message as written; another language renders ``event_code(e)`` with
its own table (``soak.report.i18n.EVENT_CHINESE``, through ``soak.report.sentences.event_text``).
An event whose detail lacks the values (a run recorded before they were kept, a message of
free text such as an exception's) has no code here, and is shown as written in every language.

Nothing here reads a message back: the code is chosen from the detail alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from soak.report.units import plain

Said = tuple[str, dict[str, Any]]
_MIB = 1 << 20


def recorded(text: str | None) -> str:
    """An event's message as written; one a workload wrote as a JSON record reads as "key
    value" pairs."""
    if not text:
        return ""
    if text.lstrip().startswith(("{", "[")):
        try:
            return plain(json.loads(text))
        except ValueError:
            pass
    return text


def _has(d: Mapping[str, Any], *keys: str) -> bool:
    return all(d.get(k) is not None for k in keys)


def _failure(d: Mapping[str, Any]) -> Said | None:
    """How a workload's process failed, from the supervisor's detail: "hung", "signal", "exit"."""
    if _has(d, "stalled_s"):
        return "hung", {"stalled_s": d["stalled_s"]}
    if isinstance(d.get("exit_code"), int):
        rc = d["exit_code"]
        return ("signal", {"signal": -rc}) if rc < 0 else ("exit", {"exit_code": rc})
    return None


def _crash(e: Any, d: Mapping[str, Any]) -> Said | None:
    how = _failure(d)
    if e.workload is None or how is None or how[0] == "hung":
        return None
    return f"event.crash.{how[0]}", {"workload": e.workload, **how[1]}


def _hang(e: Any, d: Mapping[str, Any]) -> Said | None:
    if e.workload is None or not _has(d, "stalled_s"):
        return None
    return "event.hang", {"workload": e.workload, "stalled_s": d["stalled_s"]}


def _restart(e: Any, d: Mapping[str, Any]) -> Said | None:
    if e.workload is None or not _has(d, "attempt", "restarts", "counted"):
        return None
    code = "event.restart" if d["counted"] else "event.restart.uncounted"
    return code, {"workload": e.workload, "restarts": d["restarts"], "attempt": d["attempt"]}


def _exit(e: Any, d: Mapping[str, Any]) -> Said | None:
    # the supervisor's "finished (exit 0)"; a rank's own exit line (SIGTERM, an exception) is free text
    if e.workload is None or d.get("heartbeat_event") or d.get("exit_code") != 0:
        return None
    return "event.exit.finished", {"workload": e.workload}


_STOP_REASONS = {"store": "event.stop.store", "disk": "event.stop.disk"}


def _stop(e: Any, d: Mapping[str, Any]) -> Said | None:
    if d.get("gave_up"):
        how = _failure(d)
        if e.workload is None or how is None or not _has(d, "restarts"):
            return None
        return f"event.stop.gave_up.{how[0]}", {"workload": e.workload, "restarts": d["restarts"], **how[1]}
    reason = d.get("reason")
    if reason == "join_timeout":
        if not _has(d, "joined", "nodes", "join_timeout_s", "missing_ranks"):
            return None
        return "event.stop.join_timeout", {**{k: d[k] for k in ("joined", "nodes", "join_timeout_s", "missing_ranks")},
                                           "joined_count": len(d["joined"])}
    if isinstance(reason, str) and reason.startswith("SIG"):
        return "event.stop.signal", {"signal": reason}
    if reason in _STOP_REASONS:
        return _STOP_REASONS[reason], {}
    return None  # a cluster's reason ("node node-2 lost") is free text


def _checkpoint(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "step"):
        return None
    return "event.checkpoint", {"step": d["step"], "seconds": d.get("seconds")}


def _resume(e: Any, d: Mapping[str, Any]) -> Said | None:
    if d.get("heartbeat_event") == "resume":
        return ("event.resume.step", {"step": d["step"]}) if _has(d, "step") else None
    return ("event.resume.daemon", {"pid": d["pid"]}) if _has(d, "pid") else None


def _gap(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "start", "end"):
        return None
    return "event.gap", {"down_s": float(d["end"]) - float(d["start"]), "node": e.node}


def _note(e: Any, d: Mapping[str, Any]) -> Said | None:
    if d.get("burn_in"):
        if not _has(d, "min_uninterrupted_h", "since", "planned_end", "planned_start"):
            return None
        start = float(d["planned_start"])
        return "event.note.burn_in", {"min_uninterrupted_h": d["min_uninterrupted_h"],
                                      "since_s": float(d["since"]) - start,
                                      "end_s": float(d["planned_end"]) - start, "capped": bool(d.get("capped"))}
    if d.get("blind") and _has(d, "kind", "interval_s", "max_interval_s"):
        return "event.note.blind", {k: d.get(k) for k in ("kind", "interval_s", "max_interval_s", "fix_interval_s",
                                                           "fix_time_scale", "steps")}
    if _has(d, "manifest_error"):
        return "event.note.manifest_failed", {"error": d["manifest_error"]}
    if d.get("cluster_note") in ("run_ending", "failed_elsewhere"):
        how = _hang(e, d) if d.get("failure") == "hang" else _crash(e, d)
        if how is not None:
            return f"event.note.{d['cluster_note']}.{how[0].rsplit('.', 1)[-1]}", how[1]
    return None  # a check's mismatches: free text


def _preflight(e: Any, d: Mapping[str, Any]) -> Said | None:
    if d.get("version_drift") is not None or not _has(d, "status"):
        return None  # the version lock's lines name each field in English
    failed = [str(c.get("name")) for c in d.get("checks") or [] if isinstance(c, Mapping) and c.get("status") == "fail"]
    return "event.preflight", {"status": d["status"], "failed": failed}


def _outage(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "reader", "error"):
        return None
    code = "event.outage.devices" if d["reader"] == "devices" else "event.outage.reader"
    return code, {"reader": d["reader"], "error": d["error"], "chips": len(d.get("devices") or []) or None}


def _data_stall(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "step", "seconds"):
        return None
    fault = d.get("inject")
    if isinstance(fault, Mapping):  # the plan's stall: its message names the fault, not the step
        return ("event.data_stall.planned", {"spec": fault["spec"], "seconds": d["seconds"]}) \
            if fault.get("action") == "stall" and _has(fault, "spec") else None
    return "event.data_stall", {"step": d["step"], "seconds": d["seconds"]}


_INJECT_VALUES = {"armed": (), "exit": ("exit_code",), "hang": (), "slow": ("factor",), "corrupt": ()}


def _inject(e: Any, d: Mapping[str, Any]) -> Said | None:
    fault = d.get("inject")
    if not isinstance(fault, Mapping) or fault.get("action") not in _INJECT_VALUES or not _has(fault, "spec"):
        return None
    keys = _INJECT_VALUES[fault["action"]]
    if not _has(fault, *keys) or (fault["action"] == "slow" and not _has(d, "step")):
        return None
    return f"event.inject.{fault['action']}", {"spec": fault["spec"], "step": d.get("step"),
                                               **{k: fault[k] for k in keys}}


def _store_outage(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "wall_s", "replayed"):
        return None
    return "event.store_outage", {"wall_s": d["wall_s"], "replayed": d["replayed"], "node": d.get("node")}


def _node_joined(e: Any, d: Mapping[str, Any]) -> Said | None:
    if e.node is None or not _has(d, "rank", "host"):
        return None
    return "event.node_joined", {"node": e.node, "rank": d["rank"], "host": d["host"]}


def _node_lost(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "node", "rank", "silent_s", "bound_s"):
        return None
    return "event.node_lost", {k: d.get(k) for k in ("node", "rank", "silent_s", "bound_s", "found_by")}


def _cluster_restart(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "generation"):
        return None
    g = d["generation"]
    if _has(d, "rendezvous"):
        keys = ("previous_rendezvous_node", "previous_status", "rendezvous_node", "rendezvous")
        if not _has(d, *keys):
            return None
        return "event.cluster_restart.rendezvous", {"generation": g, **{k: d[k] for k in keys}}
    if d.get("rejoined") and _has(d, "node"):
        return "event.cluster_restart.rejoined", {"node": d["node"], "generation": g}
    if d.get("lost"):
        return "event.cluster_restart.lost", {"lost": list(d["lost"]), "generation": g}
    failure = d.get("failure")
    if isinstance(failure, Mapping) and e.workload and _has(d, "node"):
        how = _hang(e, failure) if failure.get("kind") == "hang" else _crash(e, failure)
        if how is not None:
            return f"event.cluster_restart.{how[0].rsplit('.', 1)[-1]}", {**how[1], "node": d["node"], "generation": g}
    return None


def _capture(e: Any, d: Mapping[str, Any]) -> Said | None:
    if d.get("error"):
        return "event.capture.failed", {"error": d["error"]}
    shares = d.get("shares")
    if not isinstance(shares, Mapping) or not _has(d, "label", "first_step", "last_step"):
        return None
    top = sorted(shares, key=lambda k: -(shares[k] or 0))[:3]
    values: dict[str, Any] = {"label": d["label"], "first_step": d["first_step"], "last_step": d["last_step"]}
    for i, k in enumerate(top, 1):
        values[f"top{i}"], values[f"top{i}_share"] = k, shares[k]
    return "event.capture", values


def _link_test(e: Any, d: Mapping[str, Any]) -> Said | None:
    pairs = d.get("pairs")
    if not isinstance(pairs, list) or not _has(d, "when", "nodes"):
        return None
    sizes = [p.get("size_bytes") for p in pairs if isinstance(p, Mapping) and p.get("size_bytes")]
    if not sizes:
        return None
    with_bw = [p for p in pairs if p.get("busbw_gbps")]
    worst = min(with_bw, key=lambda p: p["busbw_gbps"], default=None)
    return "event.link_test", {
        "when": d["when"], "pairs": len(pairs), "nodes": len(d["nodes"]), "size_mib": sizes[0] / _MIB,
        "lowest_a": None if worst is None else worst["a"], "lowest_b": None if worst is None else worst["b"],
        "lowest_gbps": None if worst is None else worst["busbw_gbps"]}


def _clock_drift(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "node", "offset_s", "bound_s", "off"):
        return None
    code = "event.clock_drift.off" if d["off"] else "event.clock_drift.back"
    return code, {"node": d["node"], "offset_s": d["offset_s"], "bound_s": d["bound_s"]}


def _disk(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "free_bytes", "need_bytes", "run_dir", "filled"):
        return None
    return "event.disk", {"run_dir": d["run_dir"], "free_mib": d["free_bytes"] / _MIB,
                          "need_mib": d["need_bytes"] / _MIB, "filled": bool(d["filled"])}


_FAULT_SIGNALS = ("fault_code", "health", "ecc_uncorrectable", "ecc_isolated_double", "ecc_isolated_single",
                  "ecc_correctable", "link_down", "link_up", "link_flap", "xid", "row_remap_failed",
                  "row_remap_pending", "retired_pages_pending")


def _device_fault(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "device", "signal") or d["signal"] not in _FAULT_SIGNALS:
        return None
    cleared = bool(d.get("cleared")) and d["signal"] in ("fault_code", "health")
    code = f"event.device_fault.{d['signal']}" + (".cleared" if cleared else "")
    return code, {k: d.get(k) for k in ("device", "serial", "code", "text", "level", "action", "value", "previous")}


def _start(e: Any, d: Mapping[str, Any]) -> Said | None:
    procs = d.get("workloads")
    if isinstance(d.get("model_size"), str) and isinstance(d.get("world_size"), int):
        # a rank's start line: its settings, read from its record when the daemon stored it
        planned = d.get("inject_planned")
        inject = ", ".join(str(x) for x in planned) if isinstance(planned, list) and planned else None
        return "event.start.rank", {"model_size": d["model_size"], "world_size": d["world_size"], "inject": inject}
    if not isinstance(procs, list) or not procs or not _has(d, "duration_s"):
        return None  # a rank's start line of an earlier run: its settings, written as they are
    return "event.start", {"workloads": [{"name": str(w["name"]), "nproc": int(w["nproc"])} for w in procs],
                           "duration_s": d["duration_s"]}


def _numeric_class(d: Mapping[str, Any]) -> dict[str, Any]:
    """How a numerical fault was settled (``soak.workloads.numerics``), as the template's flags."""
    cls, rank = d.get("classification"), d.get("suspect_rank")
    return {"chip_rank": rank if cls == "chip" else None, "class_chip_only": cls == "chip" and rank is None,
            "class_transient": cls == "transient", "class_everywhere": cls == "everywhere"}


def _alignment(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "steps", "max_rel_diff", "tolerance"):
        return None
    within = float(d["max_rel_diff"]) <= float(d["tolerance"])
    return f"event.alignment.{'within' if within else 'beyond'}", {
        "steps": d["steps"], "max_rel_diff": float(d["max_rel_diff"]), "tolerance": float(d["tolerance"])}


def _sdc(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "check"):
        return None
    return "event.sdc", {"check": d["check"], "step": d.get("step"), "error": d.get("error"),
                         "tolerance": d.get("tolerance") or None, **_numeric_class(d)}


def _nonfinite(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "what", "value"):
        return None
    return "event.nonfinite", {"what": d["what"], "value": str(d["value"]), "step": d.get("step"), **_numeric_class(d)}


def _loss_spike(e: Any, d: Mapping[str, Any]) -> Said | None:
    if not _has(d, "loss", "median", "multiple"):
        return None
    return "event.loss_spike", {"loss": float(d["loss"]), "median": float(d["median"]), "multiple": float(d["multiple"]),
                                "step": d.get("step"), **_numeric_class(d)}


_READERS: dict[str, Callable[[Any, Mapping[str, Any]], Said | None]] = {
    "start": _start, "stop": _stop, "restart": _restart, "checkpoint": _checkpoint, "crash": _crash,
    "hang": _hang, "exit": _exit, "resume": _resume, "gap": _gap, "note": _note, "preflight": _preflight,
    "outage": _outage, "data_stall": _data_stall, "store_outage": _store_outage, "node_joined": _node_joined,
    "node_lost": _node_lost, "cluster_restart": _cluster_restart, "capture": _capture, "link_test": _link_test,
    "clock_drift": _clock_drift, "disk": _disk, "inject": _inject, "device_fault": _device_fault,
    "alignment": _alignment, "sdc": _sdc, "nonfinite": _nonfinite, "loss_spike": _loss_spike,
}
"""The kinds whose message is made from their detail. Left out, shown as written in every
language: ``comm_timeout`` (the collective library's error), ``phase`` (no producer),
``finding`` (rendered from its own code)."""


CODES: tuple[str, ...] = (
    "event.start", "event.start.rank", "event.stop.gave_up.hung", "event.stop.gave_up.signal", "event.stop.gave_up.exit",
    "event.stop.signal", "event.stop.store", "event.stop.disk", "event.stop.join_timeout", "event.restart",
    "event.restart.uncounted", "event.crash.signal", "event.crash.exit", "event.hang", "event.exit.finished",
    "event.checkpoint", "event.resume.daemon", "event.resume.step", "event.gap", "event.note.burn_in", "event.note.blind",
    "event.note.manifest_failed", "event.note.run_ending.signal", "event.note.run_ending.exit",
    "event.note.run_ending.hang", "event.note.failed_elsewhere.signal", "event.note.failed_elsewhere.exit",
    "event.note.failed_elsewhere.hang", "event.preflight", "event.outage.reader", "event.outage.devices",
    "event.data_stall", "event.data_stall.planned", "event.inject.armed", "event.inject.exit",
    "event.inject.hang", "event.inject.slow", "event.inject.corrupt", "event.store_outage", "event.node_joined", "event.node_lost",
    "event.cluster_restart.rendezvous", "event.cluster_restart.rejoined", "event.cluster_restart.lost",
    "event.cluster_restart.signal", "event.cluster_restart.exit", "event.cluster_restart.hang", "event.capture",
    "event.capture.failed", "event.link_test", "event.clock_drift.off", "event.clock_drift.back", "event.disk",
    *(f"event.device_fault.{s}" for s in _FAULT_SIGNALS), "event.device_fault.fault_code.cleared",
    "event.device_fault.health.cleared", "event.alignment.within", "event.alignment.beyond", "event.sdc",
    "event.nonfinite", "event.loss_spike",
)
"""Every code ``event_code`` gives: each language's table has a template for each."""


def event_code(e: Any) -> Said | None:
    """The code and values of ``e``'s message (an ``EventView``), or None where its detail
    does not hold them."""
    read = _READERS.get(e.kind)
    detail = getattr(e, "detail", None)
    if read is None or not isinstance(detail, Mapping):
        return None
    try:
        return read(e, detail)
    except (TypeError, ValueError, KeyError, AttributeError):  # a detail of another shape: as written
        return None
