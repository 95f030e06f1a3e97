"""The chip's own fault reports: what the watch sees change between readings, and what the
run's recorded changes make of its verdict. Readings come from recorded real output where the
fixtures have the signal (031: Alarm with three codes; 030/031: a port that went down)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from soak.analysis import device_faults as df
from soak.analysis.profile import FaultsParams
from soak.faultcodes import builtin_table
from soak.telemetry import npu_query as q
from soak.telemetry.records import DeviceSample, Snapshot
from tests.telemetry.test_readers_npu_query import section

F031 = "031_910A_health_Alarm_multiline_and_errors_after.txt"


def _chip(device: str = "npu0-0", **fields: object) -> DeviceSample:
    base = dict(device=device, backend="npu", serial="SN" + device, health="OK", healthy=True, fault_codes=(),
                fault_texts=(), ecc_single_bit_errors=0, ecc_double_bit_errors=0, ecc_single_bit_isolated_pages=0,
                ecc_double_bit_isolated_pages=0, link_up=True, link_up_count=2)
    base.update(fields)
    return DeviceSample(**base)  # type: ignore[arg-type]


def _tick(ts: float, *chips: DeviceSample) -> Snapshot:
    return Snapshot(ts=ts, host="h", devices=chips)


def _events(changes: list[df.FaultChange], node: str | None = None) -> list[SimpleNamespace]:
    return [SimpleNamespace(kind="device_fault", ts=c.ts, node=node, detail=c.detail(), message=c.message())
            for c in changes]


def test_alarm_with_three_codes_of_031_is_three_coded_changes_and_a_failing_health():
    h = q.parse_health(section(F031, "-c 0 -t health"), npu_id=0, chip_id=0)
    watch = df.FaultWatch(builtin_table())
    assert watch.track(_tick(0.0, _chip())) == []  # a clean chip's first reading says nothing
    changes = watch.track(_tick(60.0, _chip(**h.sample_fields())))
    codes = [c for c in changes if c.signal == "fault_code"]
    assert [c.code for c in codes] == sorted(h.error_codes)
    by = {c.code: c for c in codes}
    # the chip's own words are kept with each code, in the order npu-smi printed them
    assert by["A4025021"].text == "ascend_monitor adda heart beat lost error"
    assert by["8C03A000"].text.startswith("node type=process-manager")
    table = builtin_table()
    for c in codes:
        fc = table.ascend(c.code)
        assert (c.level, c.severity, c.source) == (fc.level, fc.severity, fc.source)
    health = next(c for c in changes if c.signal == "health")
    assert (health.level, health.severity, health.serial) == ("Alarm", "fail", "SNnpu0-0")
    assert watch.open()[("npu0-0", "health")] == "fail"
    # the same report again is no change; the codes clearing is one
    assert watch.track(_tick(120.0, _chip(**h.sample_fields()))) == []
    cleared = watch.track(_tick(180.0, _chip()))
    assert {(c.signal, c.cleared) for c in cleared} == {("fault_code", True), ("health", True)}
    assert ("npu0-0", "health") not in watch.open()


def test_ecc_counts_rise_and_a_chip_that_arrives_faulty():
    watch = df.FaultWatch(builtin_table())
    first = watch.track(_tick(0.0, _chip("npu0-0"), _chip("npu1-0", ecc_double_bit_errors=2)))
    assert [(c.device, c.signal, c.previous, c.value) for c in first] == [("npu1-0", "ecc_uncorrectable", None, 2.0)]
    later = watch.track(_tick(60.0, _chip("npu0-0", ecc_single_bit_errors=3, ecc_double_bit_isolated_pages=1),
                              _chip("npu1-0", ecc_double_bit_errors=2)))
    assert {(c.signal, c.severity, c.previous, c.value) for c in later} == {
        ("ecc_correctable", "info", 0.0, 3.0), ("ecc_isolated_double", "fail", 0.0, 1.0)}
    # a view not read this tick (None) is not a change, and does not reset what was seen
    assert watch.track(_tick(90.0, _chip("npu0-0", ecc_single_bit_errors=None, ecc_double_bit_isolated_pages=1))) == []
    assert watch.track(_tick(99.0, _chip("npu0-0", ecc_single_bit_errors=3, ecc_double_bit_isolated_pages=1))) == []


def test_port_down_up_and_flaps():
    watch = df.FaultWatch(builtin_table())
    watch.track(_tick(0.0, _chip()))
    down = watch.track(_tick(10.0, _chip(link_up=False)))
    up = watch.track(_tick(40.0, _chip(link_up=True, link_up_count=3)))
    assert [c.signal for c in down] == ["link_down"]
    assert sorted(c.signal for c in up) == ["link_flap", "link_up"]
    # a flap between two polls: only the up count shows it
    flaps = watch.track(_tick(100.0, _chip(link_up_count=5)))
    assert [(c.signal, c.previous, c.value) for c in flaps] == [("link_flap", 3.0, 5.0)]
    findings = df.assess(_events(down + up + flaps), FaultsParams(), end=200.0, hours=1.0)
    (link,) = findings
    v = link["values"]
    assert (v["downs"], v["longest_down_s"], v["flaps"], v["still_down"]) == (1, 30.0, 3, False)
    assert link["severity"] == "fail"  # 3 flaps > max_link_flaps 2
    assert "network port down 1 time(s), longest 30 s, 3 flap(s)" in link["summary"]
    one = df.assess(_events(down + up), FaultsParams(), end=200.0, hours=1.0)
    assert one[0]["severity"] == "warn"  # one down of 30 s, one flap: within the bounds


def test_a_port_still_down_at_the_end_is_down_until_then():
    watch = df.FaultWatch(builtin_table())
    watch.track(_tick(0.0, _chip()))
    down = watch.track(_tick(10.0, _chip(link_up=False)))
    (f,) = df.assess(_events(down), FaultsParams(max_link_down_s=60.0), end=100.0, hours=1.0)
    assert (f["values"]["longest_down_s"], f["values"]["still_down"], f["severity"]) == (90.0, True, "fail")
    (f,) = df.assess(_events(down), FaultsParams(max_link_down_s=60.0), end=50.0, hours=1.0)
    assert f["severity"] == "warn"


def test_correctable_errors_warn_on_their_rate_and_against_the_peers():
    watch = df.FaultWatch(builtin_table())
    chips = [f"npu{i}-0" for i in range(8)]
    changes = watch.track(_tick(0.0, *(_chip(c) for c in chips)))
    changes += watch.track(_tick(3600.0, *(_chip(c, ecc_single_bit_errors=1 if c != "npu3-0" else 25) for c in chips)))
    findings = {f["device"]: f for f in df.assess(_events(changes), FaultsParams(), end=7200.0, hours=2.0, chips=8)}
    assert findings["npu0-0"]["severity"] == "info"  # 1 in 2 h: seen, not a warning
    hot = findings["npu3-0"]
    # 12.5/h is over the 10/h limit, and 25 is over 10 x the chips' median 1
    assert hot["severity"] == "warn" and hot["values"]["per_h"] == 12.5 and hot["values"]["peer_median"] == 1.0
    slow = df.assess(_events(changes), FaultsParams(), end=7200.0 * 3, hours=6.0, chips=8)
    assert next(f for f in slow if f["device"] == "npu3-0")["severity"] == "warn"  # the peers alone warn
    assert next(f for f in slow if f["device"] == "npu3-0")["values"]["per_h"] < 10


def test_xid_of_a_hardware_class_fails_and_interrupts():
    watch = df.FaultWatch(builtin_table())
    gpu = DeviceSample(device="cuda0", backend="cuda", serial="1320", xid_errors=0)
    watch.track(_tick(0.0, gpu))
    (c,) = watch.track(_tick(5.0, replace(gpu, xid_errors=1, xid_last=79)))
    fc = builtin_table().xid(79)
    assert (c.signal, c.code, c.level, c.severity, c.interrupts) == ("xid", "79", fc.level, "fail", True)
    (app,) = watch.track(_tick(9.0, replace(gpu, xid_errors=2, xid_last=13)))
    assert app.severity == "info" and not app.interrupts
    assert [n for n, _ in df.interruptions(_events([c, app]))] == [None]


def test_a_resumed_watch_goes_on_from_the_recorded_changes():
    h = q.parse_health(section(F031, "-c 0 -t health"), npu_id=0, chip_id=0)
    watch = df.FaultWatch(builtin_table())
    watch.track(_tick(0.0, _chip()))
    seen = watch.track(_tick(60.0, _chip(ecc_double_bit_errors=4, link_up=False, **h.sample_fields())))
    again = df.FaultWatch(builtin_table())
    again.resume(_events(seen))
    # the daemon came back: the same readings are no new fault, a further rise is
    assert again.track(_tick(120.0, _chip(ecc_double_bit_errors=4, link_up=False, **h.sample_fields()))) == []
    (more,) = again.track(_tick(180.0, _chip(ecc_double_bit_errors=5, link_up=False, **h.sample_fields())))
    assert (more.signal, more.previous, more.value) == ("ecc_uncorrectable", 4.0, 5.0)
    # another node's changes are not this node's
    other = df.FaultWatch(builtin_table())
    other.resume(_events(seen, node="n2"), node="n1")
    assert other.track(_tick(120.0, _chip(ecc_double_bit_errors=4))) != []


def test_events_round_trip_and_the_english_message_names_chip_serial_and_signal():
    watch = df.FaultWatch(builtin_table())
    watch.track(_tick(0.0, _chip()))
    (c,) = watch.track(_tick(30.0, _chip(ecc_double_bit_errors=6)))
    (e,) = _events([c])
    assert df.FaultChange.of_event(e) == c
    assert e.message == "device fault on npu0-0 (serial SNnpu0-0): uncorrectable ECC errors 0 -> 6"


def test_the_criterion_counts_reads_and_is_not_judged_below_the_cadence_it_needs():
    from soak import criteria as cr

    params = FaultsParams()
    # (health, ecc, link) reads per chip, as Store.fault_evidence counts them
    ev = df.FaultEvidence({(None, "npu0-0"): (60, 30, 30), (None, "npu1-0"): (60, 30, 30),
                           (None, "npu2-0"): (60, 1, 1)})
    # one read per minute of the run: judged, on the chips read twice or more
    c = cr.device_faults_criterion([], ev, params, read_interval_s=60.0)
    assert c["met"] is True and c["values"]["read"] == 2 and c["values"]["readings"] == 60
    assert c["values"]["not_read"] == ["npu2-0"] and "not read: npu2-0" in c["measured"]
    assert "read >= 2 times, once per 30 min of the run" in c["required"]
    # the 60 s detail interval at x60: one read per hour of the run, a chip read once or twice
    slow = df.FaultEvidence({(None, f"npu{i}-0"): (64, 1 + i % 2, 1) for i in range(4)})
    c = cr.device_faults_criterion([], slow, params, read_interval_s=3600.0)
    assert c["met"] is None and c["measured_code"] == "criterion.device_faults.measured_cadence"
    assert c["measured"].startswith("not judged: fault views read once per 1 h 00 min of the run (2 read(s)")
    # a run that would pass is not judged on it: the verdict does not claim what was not read
    from soak.analysis.messages import say
    from soak.judge import not_claimed

    verdict, why = not_claimed("pass", [c], [])
    assert verdict is None and [say(r.code, r.values) for r in why] == [
        "device_fault cannot be judged at one reading per 1 h 00 min: needs one per 30 min or less"]
    # a fault it did see fails it all the same
    failing = [{"kind": "device_fault", "severity": "fail"}]
    assert cr.device_faults_criterion(failing, slow, params, read_interval_s=3600.0)["met"] is False
    # an imported run (cadence unknown) is judged on its reads
    assert cr.device_faults_criterion([], ev, params)["met"] is True
