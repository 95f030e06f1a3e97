"""What each simulated chip shows at a given point of the (scaled) time line.

Pure functions of (config, elapsed seconds): the same seed and time give the same numbers, in
any process, so a test can predict what the tool will print and a daemon sampling the fleet
sees one consistent history however often it calls.
"""

from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass

from soak.telemetry.sim.config import SimConfig, Spec, parse_chips
from soak.telemetry.sim.families import FAMILY_SPECS, Family

SAW_PERIOD_S = 600.0  # allocator sawtooth: grows for 10 min, then a checkpoint frees it
HEALTH_INFO = {
    "A4025021": "ascend_monitor adda heart beat lost error",
    "8C03A000": "node type=process-manager, sensor type=General Software, event state=The process start failed or exit abnormally",
    "8C084E00": "node type=adda, sensor type=Heartbeat Sensor, event state=Heartbeat Lost.",
}


def noise(seed: int, *key: object) -> float:
    """A stable pseudo-random number in [-1, 1) (Python's own hash of str is salted per process)."""
    digest = hashlib.blake2b(repr((seed, *key)).encode(), digest_size=8).digest()
    return struct.unpack("<Q", digest)[0] / 2**63 - 1.0


@dataclass(frozen=True, slots=True)
class ChipState:
    index: int  # logical id, 0..chips-1 (also the A3 Phy-ID and the 310P Device column)
    npu_id: int
    chip_id: int
    present: bool
    busy: bool  # a training process holds memory on it
    health: str
    error_codes: tuple[str, ...]
    util_pct: int
    mem_used_mb: int
    mem_total_mb: int
    temp_c: int
    power_w: float | None
    process_mb: int
    pid: int
    ecc_single: int
    ecc_double: int
    link_up: bool
    link_up_count: int  # hccn_tool -link_stat: times the port came up (1 at power-on)


def _window(t_h: float, start_h: float, end_h: float) -> bool:
    return t_h >= start_h and (end_h < 0 or t_h < end_h)


class FleetModel:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.family: Family = FAMILY_SPECS[config.family]
        n = config.chips
        self._scen: list[tuple[Spec, frozenset[int]]] = [
            (s, parse_chips(s.params.get("chips", "all"), n)) for s in config.scenarios
        ]

    def _active(self, name: str, index: int) -> list[Spec]:
        return [s for s, chips in self._scen if s.name == name and index in chips]

    def chip(self, index: int, t_s: float) -> ChipState:
        cfg, fam = self.config, self.family
        seed, t_h = cfg.seed, t_s / 3600.0
        bucket = int(t_s)  # noise changes once per scaled second
        cpn = fam.chips_per_npu
        npu_id, chip_id = cfg.npu_id_base + index // cpn, index % cpn

        busy = not self._active("idle", index)
        # A hang freezes the memory picture at its onset and stops the compute.
        hang = next((s for s in self._active("hang", index) if t_h >= s.num("at_h")), None)
        t_mem = min(t_s, hang.num("at_h") * 3600.0) if hang else t_s

        mem = fam.idle_mem_mb
        if busy:
            phase = (noise(seed, "saw", index) + 1) / 2 * SAW_PERIOD_S
            saw = ((t_mem + phase) % SAW_PERIOD_S) / SAW_PERIOD_S
            mem += fam.work_mem_mb + int(fam.saw_mb * saw)
            for s in self._active("hbm_creep", index):
                onset = s.num("onset_h") * 3600.0
                if t_mem > onset:
                    mem += int(s.num("rate_mb_h") * (t_mem - onset) / 3600.0)
        mem = min(mem, fam.mem_total_mb)

        util = 0.0
        if busy:
            util = 95.0 + 3.0 * noise(seed, "util", index, bucket)
            for s in self._active("util_drops", index):
                pos = (t_s - s.num("offset_s")) % s.num("period_s")
                if t_s >= s.num("offset_s") and pos < s.num("duration_s"):
                    util = s.num("level_pct")
            if hang:
                util = 0.0
        util_i = max(0, min(100, int(round(util))))

        temp = fam.idle_temp_c + 0.15 * util_i + 1.0 * noise(seed, "temp", index, bucket)
        for s in self._active("thermal", index):
            start, dur = s.num("start_h") * 3600.0, s.num("duration_h") * 3600.0
            if start <= t_s < start + dur and dur > 0:
                frac = math.sin(math.pi * (t_s - start) / dur)
                temp += (s.num("peak_c") - temp) * frac
        power: float | None = None
        if fam.idle_power_w is not None and not (fam.layout == "a3" and chip_id == 1):
            # A3 reports one power per NPU id, on chip 0; chip 1 prints "-".
            power = round(fam.idle_power_w + fam.power_per_util_w * util_i
                          + 3.0 * noise(seed, "power", index, bucket), 1)

        health, codes = "OK", ()
        for s in self._active("health_alarm", index):
            if _window(t_h, s.num("at_h"), s.num("until_h")):
                health = str(s.get("status"))
                codes = tuple(c for c in str(s.get("codes")).replace("+", " ").split() if c)

        single = double = 0
        for s in self._active("ecc_errors", index):
            since_h = max(0.0, t_h - s.num("onset_h"))
            single += int(s.num("single_per_h") * since_h)
            double += int(s.num("double_per_h") * since_h)

        present = not any(
            _window(t_h, f.num("from_h"), f.num("until_h"))
            and index in parse_chips(f.params.get("chips", "0"), cfg.chips)
            for f in cfg.faults
            if f.name == "vanish"
        )
        link_up = not any(_window(t_h, s.num("at_h"), s.num("until_h")) for s in self._active("link_down", index))
        ups = 1 + sum(1 for s in self._active("link_down", index)
                      if 0 <= s.num("at_h") < s.num("until_h") <= t_h)
        for s in self._active("link_flap", index):
            every_s, down_s, since_s = s.num("every_h") * 3600.0, s.num("down_s"), t_s - s.num("onset_h") * 3600.0
            if every_s > 0 and since_s >= 0:
                flaps, pos = divmod(since_s, every_s)
                ups += int(flaps) + (1 if pos >= down_s else 0)
                link_up = link_up and pos >= down_s
        pid = 20000 + int((noise(seed, "pid", index) + 1) * 30000) + index
        return ChipState(
            index=index, npu_id=npu_id, chip_id=chip_id, present=present, busy=busy,
            health=health, error_codes=codes, util_pct=util_i, mem_used_mb=mem,
            mem_total_mb=fam.mem_total_mb, temp_c=int(round(temp)), power_w=power,
            process_mb=max(0, mem - fam.idle_mem_mb) if busy else 0, pid=pid,
            ecc_single=single, ecc_double=double, link_up=link_up, link_up_count=ups,
        )

    def chips(self, t_s: float) -> list[ChipState]:
        return [self.chip(i, t_s) for i in range(self.config.chips)]
