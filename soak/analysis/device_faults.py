"""The chip's own fault reports: what changed between two readings, and what the run's
changes mean for its verdict.

Every fault signal a reader gives (``DeviceSample``) is watched here, in one place:

==========================  ==============================================  ===============
signal                      from                                            severity
==========================  ==============================================  ===============
``fault_code``              ``npu-smi info -t health`` Error Code           the code's level
                                                                            (``soak.faultcodes``)
``health``                  the tool's health word                          Warning: warn;
                                                                            Alarm, Critical: fail
``ecc_uncorrectable``       double-bit (uncorrected) ECC error count up     fail
``ecc_isolated_double``     double-bit isolated pages up                    fail
``ecc_isolated_single``     single-bit isolated pages up                    warn
``ecc_correctable``         single-bit (corrected) count up                 info; the criterion
                                                                            warns on its rate and
                                                                            against the peers
``link_down``/``link_up``   ``hccn_tool -link``: the port's state           the criterion: down
                                                                            past a bound fails
``link_flap``               ``hccn_tool -link_stat``: its up count grew     the criterion: more
                                                                            flaps than a bound fail
``xid``                     NVML Xid critical error events                  the Xid's class
``row_remap_failed``        NVML: a row could not be remapped               fail
``row_remap_pending``       NVML: a remap (or a page retirement) waits      warn
``retired_pages_pending``   for a reset
==========================  ==============================================  ===============

The daemon's sampler feeds each tick to a :class:`FaultWatch`, which turns what changed into
:class:`FaultChange` records (stored as ``device_fault`` events, seen on /metrics at once);
``judge`` reads those events back at any time and makes the findings and the "device faults"
criterion, with the readings of the fault views as its evidence. A value first seen non-zero
(a chip that arrives with uncorrectable errors) is a change from nothing; correctable errors and
flaps counted before the run are a baseline.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from soak.analysis.messages import say as _say
from soak.faultcodes import FaultCode, FaultTable, builtin_table, interrupts_training
from soak.telemetry.records import DeviceSample, Snapshot

SEVERITY_RANK = {"info": 0, "warn": 1, "fail": 2}
HEALTH_SEVERITY = {"warning": "warn", "alarm": "fail", "critical": "fail"}
"""The Ascend health word's severity: Warning is a minor alarm, Alarm a major and Critical a
critical one (``npu-smi info -t health``); OK, NA and UNKNOWN say nothing."""

# the finding a signal's changes make (several signals of one kind are one finding)
FINDING_OF = {
    "fault_code": "fault_code", "health": "health",
    "ecc_uncorrectable": "ecc_uncorrectable", "ecc_isolated_double": "ecc_isolated_double",
    "ecc_isolated_single": "ecc_isolated_single", "ecc_correctable": "ecc_correctable",
    "link_down": "link", "link_up": "link", "link_flap": "link",
    "xid": "xid", "row_remap_failed": "row_remap", "row_remap_pending": "reset_pending",
    "retired_pages_pending": "reset_pending",
}
FINDINGS = tuple(dict.fromkeys(FINDING_OF.values()))


@dataclass(frozen=True)
class FaultChange:
    """One change of one chip's fault report, as its ``device_fault`` event records it."""

    ts: float
    device: str
    signal: str  # a key of FINDING_OF
    severity: str  # info | warn | fail
    serial: str | None = None
    code: str | None = None  # the fault code (hex) or the Xid number
    text: str | None = None  # the chip's own text for the code, else the table's meaning
    level: str | None = None  # the device plugin's level, the Xid's class, the health word
    action: str | None = None
    source: str | None = None  # where the code's level comes from
    value: float | None = None  # the count or state now
    previous: float | None = None  # before (None: the first reading)
    cleared: bool = False  # a code gone, a port up again, health back to OK
    interrupts: bool = False  # a fault that interrupts training (reliability: cause device_fault)

    def detail(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "ts"}

    @staticmethod
    def of_event(e: Any) -> FaultChange | None:
        d = e.detail if isinstance(e.detail, Mapping) else {}
        if not d.get("device") or not d.get("signal"):
            return None
        known = {f for f in FaultChange.__dataclass_fields__ if f != "ts"}
        return FaultChange(ts=float(e.ts), **{k: v for k, v in d.items() if k in known})

    def message(self) -> str:
        """The event's message, in English (the report renders its own from the detail)."""
        what = {
            "fault_code": f"fault code {self.code} ({self.level})" + (f": {self.text}" if self.text else ""),
            "health": f"health {'back to ' if self.cleared else ''}{self.level}",
            "ecc_uncorrectable": f"uncorrectable ECC errors {_n(self.previous)} -> {_n(self.value)}",
            "ecc_isolated_double": f"double-bit isolated pages {_n(self.previous)} -> {_n(self.value)}",
            "ecc_isolated_single": f"single-bit isolated pages {_n(self.previous)} -> {_n(self.value)}",
            "ecc_correctable": f"correctable ECC errors {_n(self.previous)} -> {_n(self.value)}",
            "link_down": "network port down",
            "link_up": "network port up again",
            "link_flap": f"network port flapped (up count {_n(self.previous)} -> {_n(self.value)})",
            "xid": f"Xid {self.code} ({self.level})" + (f": {self.text}" if self.text else ""),
            "row_remap_failed": "row remapping failed",
            "row_remap_pending": "row remap pending a reset",
            "retired_pages_pending": "retired pages pending a reset",
        }[self.signal]
        if self.cleared and self.signal == "fault_code":
            what += " cleared"
        return f"device fault on {self.device}" + (f" (serial {self.serial})" if self.serial else "") + f": {what}"


def _n(v: float | None) -> str:
    return "none" if v is None else f"{v:g}"


@dataclass
class _Seen:
    """What a chip's fault views said last; None where a view was not read yet."""

    codes: frozenset[str] | None = None
    health: str | None = None
    counts: dict[str, float] = field(default_factory=dict)
    link_up: bool | None = None
    flags: dict[str, bool] = field(default_factory=dict)


# count fields: signal, DeviceSample field, severity of a rise
_COUNTS = (
    ("ecc_uncorrectable", "ecc_double_bit_errors", "fail"),
    ("ecc_isolated_double", "ecc_double_bit_isolated_pages", "fail"),
    ("ecc_isolated_single", "ecc_single_bit_isolated_pages", "warn"),
    ("ecc_correctable", "ecc_single_bit_errors", "info"),
    ("link_flap", "link_up_count", "info"),
)
_FLAGS = (
    ("row_remap_failed", "row_remap_failed", "fail"),
    ("row_remap_pending", "row_remap_pending", "warn"),
    ("retired_pages_pending", "retired_pages_pending", "warn"),
)
_COUNT_FIELD = {signal: name for signal, name, _ in _COUNTS}
_BASELINE = ("ecc_correctable", "link_flap")
_FLAG_FIELD = {signal: name for signal, name, _ in _FLAGS}


class FaultWatch:
    """Turns each tick's readings into the changes of every chip's fault report.

    Not thread-safe: one sampler thread calls ``track``. ``open`` is what is wrong now, for
    /metrics: read from any thread (a copy is swapped in whole)."""

    def __init__(self, table: FaultTable | None = None) -> None:
        self.table = table or builtin_table()
        self._seen: dict[str, _Seen] = {}
        self._open: dict[tuple[str, str], str] = {}  # (device, finding) -> severity

    def open(self) -> dict[tuple[str, str], str]:
        return dict(self._open)

    def resume(self, events: Iterable[Any], node: str | None = None) -> None:
        """Go on from the changes a run recorded (a resumed daemon): what each chip's views
        said last is what they said in its last recorded change."""
        for n, c in changes_of(events):
            if n != node:
                continue
            seen = self._seen.setdefault(c.device, _Seen())
            if c.signal == "fault_code" and c.code:
                codes = set(seen.codes or ())
                (codes.discard if c.cleared else codes.add)(c.code)
                seen.codes = frozenset(codes)
            elif c.signal == "health":
                seen.health = c.level
            elif c.signal in ("link_down", "link_up"):
                seen.link_up = c.signal == "link_up"
            elif c.signal in _FLAG_FIELD:
                seen.flags[_FLAG_FIELD[c.signal]] = True
            elif c.value is not None:
                seen.counts[_COUNT_FIELD.get(c.signal, "xid_errors")] = c.value
            self._note([c])

    def track(self, snapshot: Snapshot) -> list[FaultChange]:
        out: list[FaultChange] = []
        for d in snapshot.devices:
            if not d.up:
                continue
            seen = self._seen.setdefault(d.device, _Seen())
            # a change seen in the slow views happened by the time they were read, not by the tick
            out += self._changes(snapshot.ts if d.detail_ts is None else d.detail_ts, d, seen)
        self._note(out)
        return out

    def _note(self, out: list[FaultChange]) -> None:
        if out:
            opened = dict(self._open)
            for c in out:
                key = (c.device, FINDING_OF[c.signal])
                if c.cleared and c.signal in ("health", "link_up"):
                    opened.pop(key, None)
                elif c.severity != "info" and not c.cleared:
                    opened[key] = max(opened.get(key, "info"), c.severity, key=SEVERITY_RANK.__getitem__)
            self._open = opened

    def _changes(self, ts: float, d: DeviceSample, seen: _Seen) -> list[FaultChange]:
        out: list[FaultChange] = []

        def change(signal: str, severity: str, **kw: Any) -> None:
            out.append(FaultChange(ts=ts, device=d.device, signal=signal, severity=severity, serial=d.serial, **kw))

        if d.fault_codes is not None:
            now = frozenset(c.upper() for c in d.fault_codes)
            texts = dict(zip(d.fault_codes, d.fault_texts or (), strict=False))
            before = seen.codes or frozenset()
            for code in sorted(now - before):
                fc = self.table.ascend(code)
                change("fault_code", fc.severity, code=fc.code, text=_text(texts, code, fc), level=fc.level,
                       action=fc.action, source=fc.source, interrupts=interrupts_training(fc))
            for code in sorted(before - now):
                fc = self.table.ascend(code)
                change("fault_code", "info", code=fc.code, level=fc.level, source=fc.source, cleared=True)
            seen.codes = now
        if d.health is not None:
            word = d.health.strip()
            severity = HEALTH_SEVERITY.get(word.lower())
            was = seen.health
            if word != was and (severity is not None or (was is not None and HEALTH_SEVERITY.get(was.lower()))):
                change("health", severity or "info", level=word, cleared=severity is None)
            seen.health = word
        for signal, name, severity in _COUNTS:
            value = getattr(d, name)
            if value is None:
                continue
            was = seen.counts.get(name)
            # a first reading is a change only where the chip arrives already faulty; the
            # correctable errors and the port's flaps counted since the driver loaded are a
            # baseline (the run's rate is of its own errors)
            rose = (value > was) if was is not None else (value > 0 and signal not in _BASELINE)
            if rose:
                change(signal, severity, value=float(value), previous=was)
            seen.counts[name] = float(value)
        if d.link_up is not None:
            if d.link_up is False and seen.link_up is not False:
                change("link_down", "warn", value=0.0, previous=None if seen.link_up is None else 1.0)
            elif d.link_up and seen.link_up is False:
                change("link_up", "info", value=1.0, previous=0.0, cleared=True)
            seen.link_up = d.link_up
        if d.xid_errors is not None:
            was = seen.counts.get("xid_errors", 0.0)
            if d.xid_errors > was:
                fc = self.table.xid(d.xid_last) if d.xid_last is not None else None
                change("xid", fc.severity if fc else "warn", code=None if fc is None else fc.code,
                       text=None if fc is None else fc.meaning, level=None if fc is None else fc.level,
                       action=None if fc is None else fc.action, source=None if fc is None else fc.source,
                       value=float(d.xid_errors), previous=was, interrupts=bool(fc and interrupts_training(fc)))
            seen.counts["xid_errors"] = float(d.xid_errors)
        for signal, name, severity in _FLAGS:
            value = getattr(d, name)
            if value is None:
                continue
            if value and not seen.flags.get(name):
                change(signal, severity, value=1.0, previous=None if name not in seen.flags else 0.0)
            seen.flags[name] = bool(value)
        return out


def _text(texts: Mapping[str, str], code: str, fc: FaultCode) -> str | None:
    # the chip's own words first: they name the part that failed; the table's otherwise
    for k, v in texts.items():
        if k.upper() == code.upper() and v:
            return v
    return fc.meaning


# --------------------------------------------------------------------------- the judgement
@dataclass(frozen=True)
class FaultEvidence:
    """How often each chip's fault views answered in the run: readings with a health word,
    with ECC counts, with the port's state (``Store.fault_evidence``)."""

    chips: Mapping[tuple[str | None, str], tuple[int, int, int]]  # (node, device) -> (health, ecc, link)

    def read(self, min_reads: int = 1) -> list[tuple[str | None, str]]:
        """The chips whose ECC view answered at least ``min_reads`` times (the health word
        alone is the table's, read every tick; clean ECC is claimed only where ECC was read).
        A count is of reads: the store holds a view's values only in the tick that read it."""
        return sorted((k for k, (_, ecc, _l) in self.chips.items() if ecc >= max(1, min_reads)), key=str)

    def not_read(self, min_reads: int = 1) -> list[tuple[str | None, str]]:
        return sorted((k for k, (_, ecc, _l) in self.chips.items() if ecc < max(1, min_reads)), key=str)


def changes_of(events: Iterable[Any]) -> list[tuple[str | None, FaultChange]]:
    """Every recorded fault change, with the node it happened on."""
    out = []
    for e in events:
        if e.kind != "device_fault":
            continue
        c = FaultChange.of_event(e)
        if c is not None:
            out.append((getattr(e, "node", None), c))
    return out


def assess(events: Sequence[Any], params: Any, *, end: float, hours: float, chips: int = 0) -> list[dict[str, Any]]:
    """The findings the run's fault changes make, one per chip and finding kind: its worst
    severity, when it began and last changed, and the values its sentence is made of.

    ``params`` is the profile's ``faults`` section; ``end`` the run's end so far (a port still
    down is down until then); ``hours`` the run's span, for the correctable-error rate;
    ``chips`` how many chips were read (the peers of the correctable-error comparison)."""
    by: dict[tuple[str | None, str, str, str], list[FaultChange]] = {}
    for node, c in changes_of(events):
        kind = FINDING_OF[c.signal]
        # a fault code or Xid is a finding of its own: each has its own level and action
        by.setdefault((node, c.device, kind, str(c.code or "") if kind in ("fault_code", "xid") else ""), []).append(c)
    findings = []
    correctable: dict[tuple[str | None, str], float] = {}
    for (node, device, kind, _), cs in sorted(by.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        cs.sort(key=lambda c: c.ts)
        values: dict[str, Any] = {"device": device, "node": node, "serial": next((c.serial for c in cs if c.serial), None)}
        severity = max((c.severity for c in cs if not c.cleared), key=SEVERITY_RANK.__getitem__, default="info")
        if kind == "link":
            severity, values = _link(cs, params, end, values)
        elif kind == "ecc_correctable":
            first = cs[0].previous if cs[0].previous is not None else 0.0
            rise = (cs[-1].value or 0.0) - first
            correctable[(node, device)] = rise
            rate = rise / hours if hours > 0 else None
            values.update(count=rise, per_h=rate, max_per_h=params.correctable_max_per_h)
            severity = "warn" if rate is not None and rate > params.correctable_max_per_h else "info"
        elif kind in ("fault_code", "xid"):
            raised = [c for c in cs if not c.cleared]
            if not raised:
                continue
            c = raised[-1]
            values.update(code=c.code, level=c.level, text=c.text, action=c.action, source=c.source,
                          unknown=c.level == "Unknown", times=len(raised), cleared=bool(cs[-1].cleared))
        elif kind == "health":
            raised = [c for c in cs if not c.cleared]
            if not raised:
                continue
            values.update(words=sorted({str(c.level) for c in raised}), cleared=bool(cs[-1].cleared))
        else:
            last = cs[-1]
            first = cs[0].previous
            values.update(value=last.value, previous=first)
        findings.append(_finding(kind, device, node, cs[0].ts, cs[-1].ts if kind != "link" else end, severity, values))
    _against_peers(findings, correctable, params, chips)
    for f in findings:  # the sentence says what the finding now is
        f["summary"] = _say(f["code"], f["values"])
    return findings


def _link(cs: list[FaultChange], params: Any, end: float, values: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A port's downs and flaps: the longest down (a port still down is down until ``end``)
    and the flaps the up count shows, against the profile's bounds."""
    longest, down_at, downs = 0.0, None, 0
    flaps = 0.0
    for c in cs:
        if c.signal == "link_down":
            down_at, downs = c.ts, downs + 1
        elif c.signal == "link_up" and down_at is not None:
            longest, down_at = max(longest, c.ts - down_at), None
        elif c.signal == "link_flap":
            flaps += (c.value or 0.0) - (c.previous or 0.0)
    still_down = down_at is not None
    if still_down:
        longest = max(longest, end - down_at)
    # a down the -link polls saw and the up count counted is one flap, not two
    flaps = max(flaps, float(downs - (1 if still_down else 0)))
    fail = longest > params.max_link_down_s or flaps > params.max_link_flaps
    values.update(longest_down_s=longest, downs=downs, seen_down=downs > 0, flaps=int(flaps), still_down=still_down,
                  max_link_down_s=params.max_link_down_s, max_link_flaps=params.max_link_flaps)
    return ("fail" if fail else "warn"), values


def _against_peers(findings: list[dict[str, Any]], rise: Mapping[tuple[str | None, str], float], params: Any,
                   chips: int) -> None:
    """Raise to a warning the correctable-error finding of a chip with many more correctable
    errors than its peers: beyond ``correctable_peer_factor`` x the median of every chip's
    count (``chips`` chips in all; one without a rise counts 0), and at least
    ``correctable_peer_min`` of them."""
    counts = list(rise.values()) + [0.0] * max(0, chips - len(rise))
    if len(counts) < 2:
        return
    median = statistics.median(counts)
    for f in findings:
        if f["metric"] != "ecc_correctable":
            continue
        count = float(f["values"].get("count") or 0.0)
        if count >= params.correctable_peer_min and count > params.correctable_peer_factor * median:
            f["values"].update(peer_median=median, peer_factor=params.correctable_peer_factor)
            f["severity"] = f["values"]["severity"] = "warn" if f["severity"] == "info" else f["severity"]


def _finding(kind: str, device: str, node: str | None, start: float, end: float, severity: str,
             values: Mapping[str, Any]) -> dict[str, Any]:
    code = f"device_fault.{kind}"
    return {"kind": "device_fault", "device": device, "node": node, "metric": kind, "start": start, "end": end,
            "severity": severity, "summary": "", "code": code, "values": {**values, "severity": severity}}


def interruptions(events: Iterable[Any]) -> list[tuple[str | None, FaultChange]]:
    """The fault changes that interrupt training (RestartNPU-class codes, hardware Xids):
    failures of cause ``device_fault`` in the reliability figures and in ``soak nodes``."""
    return [(n, c) for n, c in changes_of(events) if c.interrupts and not c.cleared]
