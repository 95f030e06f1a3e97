"""/metrics between two reads of the slow views, and a reading that stops changing: the
tracker every tick feeds keeps each chip's last ECC read on the scrape, and says how long each
reading has held still and whether that is stale against its peers."""

from __future__ import annotations

from exporters.collector import SoakCollector
from exporters.readings import ReadingTracker
from soak.telemetry.records import DeviceSample, Snapshot


def _snap(ts: float, temps: dict[str, float], ecc: dict[str, int] | None = None) -> Snapshot:
    return Snapshot(ts=ts, host="n1", devices=tuple(
        DeviceSample(device=d, backend="sim", temp_c=t, ecc_double_bit_errors=(ecc or {}).get(d))
        for d, t in temps.items()))


def _samples(collector: SoakCollector, name: str) -> dict[tuple[str, ...], float]:
    out = {}
    for fam in collector.collect():
        for s in fam.samples:
            if s.name == name:
                out[tuple(s.labels.get(k, "") for k in ("device", "metric", "type"))] = s.value
    return out


def test_the_last_ecc_read_is_served_between_reads_and_a_frozen_temperature_turns_stale() -> None:
    tracker = ReadingTracker()
    latest: list[Snapshot] = []
    collector = SoakCollector(lambda: latest[-1], clock=lambda: latest[-1].ts, tracker=tracker)
    chips = [f"npu{i}-0" for i in range(4)]

    def tick(ts: float, ecc: dict[str, int] | None = None) -> None:
        # npu2-0's sensor holds 41 from the start; the others move with every reading
        temps = {d: (41.0 if d == "npu2-0" else 50.0 + (ts / 60) % 3 + i) for i, d in enumerate(chips)}
        latest.append(_snap(ts, temps, ecc))
        tracker(latest[-1])

    tick(0.0, ecc={"npu1-0": 2})  # the one read of npu1-0's ECC view
    for k in range(1, 30):
        tick(60.0 * k)
    assert _samples(collector, "soak_device_ecc_errors_total")[("npu1-0", "", "double")] == 2
    stale = _samples(collector, "soak_device_reading_stale")
    assert stale[("npu2-0", "temp_c", "")] == 0  # 29 minutes: under the hour
    for k in range(30, 70):
        tick(60.0 * k)
    unchanged = _samples(collector, "soak_device_reading_unchanged_seconds")
    assert unchanged[("npu2-0", "temp_c", "")] == 69 * 60.0 and unchanged[("npu0-0", "temp_c", "")] < 200
    stale = _samples(collector, "soak_device_reading_stale")
    assert stale[("npu2-0", "temp_c", "")] == 1
    assert [k for k, v in stale.items() if v] == [("npu2-0", "temp_c", "")]


def test_a_hall_holding_still_together_is_not_stale() -> None:
    tracker = ReadingTracker()
    for k in range(120):
        tracker(_snap(60.0 * k, {f"npu{i}-0": 30.0 for i in range(4)}))
    assert [r for r in tracker.unchanged() if r[3]] == []
    assert all(r[2] == 119 * 60.0 for r in tracker.unchanged())
