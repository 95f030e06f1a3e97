"""``SimFleet``: answers ``npu-smi`` command lines the way the real tool does.

``render(argv)`` returns ``(stdout, exit_code)`` without sleeping, for fast tests; the
installed executable (``python -m soak.telemetry.sim``) also applies the slow/hang faults
(``delay_s``) and writes the plog lines of the ``comm_timeouts`` scenario.
"""

from __future__ import annotations

from collections.abc import Sequence

from soak.telemetry.sim import plog
from soak.telemetry.sim.config import SimConfig, Spec
from soak.telemetry.sim.families import bus_id
from soak.telemetry.sim.model import HEALTH_INFO, ChipState, FleetModel, noise
from soak.telemetry.sim.table import USAGE_LINE, ProcRow, TableRow, kv, render_info_table

DCMI_FAILED = "dcmi module initialize failed. ret is {ret}\n"
NO_CARD = "There is no NPU card on this server.\n"
DETAIL_TYPES = ("usages", "health", "ecc", "board", "memory", "temp", "power", "common")


def _bad(param: str, what: str) -> tuple[str, int]:
    return f"{what}\nError parameter of {param}\n{USAGE_LINE}\n", 1


class SimFleet:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.model = FleetModel(config)
        self.family = self.model.family

    # -- faults -------------------------------------------------------------------------
    def _faults(self, argv: Sequence[str], elapsed_s: float) -> list[Spec]:
        kind = "info" if list(argv) == ["info"] else "detail"
        t_h = elapsed_s / 3600.0
        out = []
        for f in self.config.faults:
            until = f.num("until_h")
            if t_h < f.num("from_h") or (until >= 0 and t_h >= until):
                continue
            if f.get("on") in ("all", kind):
                out.append(f)
        return out

    def delay_s(self, argv: Sequence[str], elapsed_s: float | None = None) -> float:
        """Wall seconds the call should stall before answering (slow and hang faults)."""
        t = self.config.elapsed_s() if elapsed_s is None else elapsed_s
        return sum(f.num("seconds") for f in self._faults(argv, t) if f.name in ("slow", "hang"))

    # -- entry ----------------------------------------------------------------------------
    def render(self, argv: Sequence[str], elapsed_s: float | None = None) -> tuple[str, int]:
        t = self.config.elapsed_s() if elapsed_s is None else elapsed_s
        if self.config.plog_dir:
            for s in self.config.scenarios:
                if s.name == "comm_timeouts":
                    plog.write_due(s, self.config.plog_dir, self.config.origin, t, self.config.seed)
        names = {f.name: f for f in self._faults(argv, t)}
        if "dcmi" in names:
            return DCMI_FAILED.format(ret=int(names["dcmi"].num("ret"))), 0
        if "garbage" in names:
            return self._garbage(t), 0
        args = list(argv)
        if not args or args[0] != "info":
            return f"{USAGE_LINE}\n", 1
        chips = [c for c in self.model.chips(t) if c.present]
        opts = args[1:]
        if not opts:
            return self._table(chips), 0
        if opts == ["-m"]:
            return self._mapping(chips), 0
        if opts == ["-l"]:
            return self._list(chips), 0
        return self._detail(opts, chips)

    def render_hccn(self, argv: Sequence[str], elapsed_s: float | None = None) -> tuple[str, int]:
        """``hccn_tool -i N -link -g`` / ``-net_health -g`` / ``-link_stat -g``; N is the logical
        (phy) id."""
        t = self.config.elapsed_s() if elapsed_s is None else elapsed_s
        args = list(argv)
        if len(args) != 4 or args[0] != "-i" or args[3] != "-g" or args[2] not in ("-link", "-net_health",
                                                                                      "-link_stat"):
            return "Cmd execute failed!\n", 1
        try:
            index = int(args[1])
        except ValueError:
            return "Device ID is out of the valid range.\n", 1
        if not 0 <= index < self.config.chips or not self.model.chip(index, t).present:
            return "Device ID is out of the valid range.\n", 1
        chip = self.model.chip(index, t)
        up = chip.link_up
        if args[2] == "-link_stat":
            # as fixture 041 prints it; the change records are left out (their times would be
            # the simulated time line's, and soak reads only the up count)
            pre = f"[device {index}]"
            return (f"{pre}current time        : Wed Jun  7 10:08:28 2023\n"
                    f"{pre}link up count       : {chip.link_up_count}\n"
                    f"{pre}link change records :\n"), 0
        if args[2] == "-link":
            return f"link status: {'UP' if up else 'DOWN'}\n", 0
        return f"net health status: {'Success' if up else 'Fault'}\n", 0

    # -- the table --------------------------------------------------------------------------
    def _table(self, chips: list[ChipState]) -> str:
        if not chips:
            return NO_CARD
        fam = self.family
        rows, procs = [], []
        for c in chips:
            is_310p = fam.layout == "310p"
            rows.append(TableRow(
                npu_id=c.npu_id, chip_id=c.chip_id, name=fam.name, health=c.health,
                bus_id=bus_id(fam, c.index), power_w=c.power_w, temp_c=c.temp_c,
                aicore_pct=c.util_pct,
                mem_used_mb=c.mem_used_mb if is_310p else 0,
                mem_total_mb=c.mem_total_mb if is_310p else 0,
                hbm_used_mb=None if is_310p else c.mem_used_mb,
                hbm_total_mb=None if is_310p else c.mem_total_mb,
                phy_id=c.index if fam.layout == "a3" else None,
                device_id=c.index if is_310p else None,
            ))
            if c.busy:
                procs.append(ProcRow(c.npu_id, c.chip_id, c.pid, "python", c.process_mb))
        return render_info_table(fam.layout, self.config.version or fam.version, rows, procs)

    def _garbage(self, t: float) -> str:
        # What a tool that lost its mind (or a wrong binary) prints: no table, no keys.
        chars = "abcdefghijklmnopqrstuvwxyz0123456789 |+-=:"
        lines = []
        for i in range(6):
            n = 20 + int((noise(self.config.seed, "junk", i, int(t)) + 1) * 30)
            lines.append("".join(chars[int((noise(self.config.seed, i, j, int(t)) + 1) / 2 * len(chars)) % len(chars)] for j in range(n)))
        return "\n".join(lines) + "\n"

    # -- -m / -l ---------------------------------------------------------------------------
    def _cards(self, chips: list[ChipState]) -> list[tuple[int, list[ChipState]]]:
        cards: dict[int, list[ChipState]] = {}
        for c in chips:
            cards.setdefault(c.npu_id, []).append(c)
        return list(cards.items())

    def _mapping(self, chips: list[ChipState]) -> str:
        if not chips:
            return NO_CARD
        out = [f"\t{'NPU ID':<30} {'Chip ID':<30} {'Chip Logic ID':<30} {'Chip Name':<30}"]
        for npu, members in self._cards(chips):
            for c in members:
                out.append(f"\t{c.npu_id:<30} {c.chip_id:<30} {c.index:<30} Ascend {self.family.chip_name}")
            if self.family.mcu_rows:
                out.append(f"\t{npu:<30} {len(members):<30} {'-':<30} {'Mcu':<30}")
        return "\n".join(out) + "\n"

    def _list(self, chips: list[ChipState]) -> str:
        if not chips:
            return NO_CARD
        cards = self._cards(chips)
        out = [kv("Total Count", len(cards)), ""]
        for npu, members in cards:
            out.append(kv("NPU ID", npu))
            if self.family.layout == "310p":  # servers leave these out, cards print them
                out.append(kv("Product Name", "Atlas 300I Pro"))
                out.append(kv("Serial Number", f"0332{npu:04d}{self.config.seed % 10000:04d}"))
            out.append(kv("Chip Count", len(members)))
            out.append("")
        return "\n".join(out) + "\n"

    # -- -t TYPE -i N [-c C] ---------------------------------------------------------------
    def _detail(self, opts: list[str], chips: list[ChipState]) -> tuple[str, int]:
        values: dict[str, str] = {}
        it = iter(opts)
        for flag in it:
            if flag not in ("-t", "-i", "-c"):
                return f"{USAGE_LINE}\n", 1
            value = next(it, None)
            if value is None:
                return _bad(flag, f"Missing value of {flag}.")
            values[flag] = value
        kind = values.get("-t")
        if kind not in DETAIL_TYPES:
            return _bad("-t", "Invalid query type.")
        if "-i" not in values:
            return _bad("-i", "Missing card id.")
        try:
            npu = int(values["-i"])
        except ValueError:
            return _bad("-i", "Invalid card id.")
        members = [c for c in chips if c.npu_id == npu]
        if not members:
            return _bad("-i", "Invalid card id.")
        if "-c" in values:
            try:
                chip_id = int(values["-c"])
            except ValueError:
                return _bad("-c", "Invalid chip id.")
            members = [c for c in members if c.chip_id == chip_id]
            if not members:
                return _bad("-c", "Invalid chip id.")
            if kind == "health":
                return self._health(members[0]), 0
            if kind == "board":
                return self._board_chip(members[0]), 0
        elif kind == "board":
            return self._board_card(npu, members), 0
        elif kind == "health":
            return "".join(self._health(c) + kv("Chip ID", c.chip_id) + "\n\n" for c in members), 0
        width = 40 if kind == "ecc" else 30
        out = [kv("NPU ID", npu, width), kv("Chip Count", len(members), width), ""]
        for c in members:
            out += [kv(k, v, width) for k, v in self._values(kind, c)]
            out.append(kv("Chip ID", c.chip_id, width))
            out.append("")
        return "\n".join(out) + "\n", 0

    def _values(self, kind: str, c: ChipState) -> list[tuple[str, object]]:
        fam, is_310p = self.family, self.family.layout == "310p"
        mem_rate = round(100 * c.mem_used_mb / c.mem_total_mb)
        bw = min(100, int(c.util_pct * 0.6))
        if kind == "usages":
            if is_310p:
                return [("DDR Capacity(MB)", c.mem_total_mb), ("DDR Usage Rate(%)", mem_rate),
                        ("DDR Hugepages Total(page)", 0), ("DDR Hugepages Usage Rate(%)", 0),
                        ("Aicore Usage Rate(%)", c.util_pct), ("Aicpu Usage Rate(%)", 0),
                        ("Ctrlcpu Usage Rate(%)", 4), ("Vectorcore Usage Rate(%)", c.util_pct),
                        ("DDR Bandwidth Usage Rate(%)", bw), ("DVPP VDEC Usage Rate(%)", 0),
                        ("DVPP VPC Usage Rate(%)", 0), ("DVPP VENC Usage Rate(%)", 0),
                        ("DVPP JPEGE Usage Rate(%)", 0), ("DVPP JPEGD Usage Rate(%)", 0)]
            return [("DDR Capacity(MB)", 0), ("DDR Usage Rate(%)", 0),
                    ("DDR Hugepages Total(page)", 0), ("DDR Hugepages Usage Rate(%)", 0),
                    ("HBM Capacity(MB)", c.mem_total_mb), ("HBM Usage Rate(%)", mem_rate),
                    ("Aicore Usage Rate(%)", c.util_pct), ("Aivector Usage Rate(%)", c.util_pct // 2),
                    ("Aicpu Usage Rate(%)", 0), ("Ctrlcpu Usage Rate(%)", 6),
                    ("DDR Bandwidth Usage Rate(%)", 0), ("HBM Bandwidth Usage Rate(%)", bw),
                    ("NPU Utilization(%)", c.util_pct), ("Aicube Usage Rate(%)", c.util_pct)]
        if kind == "ecc":
            zeros = [("DDR Single Bit Error Count", 0), ("DDR Double Bit Error Count", 0),
                     ("DDR Single Bit Aggregate Total Err Cnt", 0), ("DDR Double Bit Aggregate Total Err Cnt", 0),
                     ("DDR Single Bit Isolated Pages Count", 0), ("DDR Double Bit Isolated Pages Count", 0)]
            return zeros + [("HBM Single Bit Error Count", c.ecc_single), ("HBM Double Bit Error Count", c.ecc_double),
                            ("HBM Single Bit Aggregate Total Err Cnt", c.ecc_single),
                            ("HBM Double Bit Aggregate Total Err Cnt", c.ecc_double),
                            ("HBM Single Bit Isolated Pages Count", 0),
                            ("HBM Double Bit Isolated Pages Count", c.ecc_double)]
        if kind == "memory":
            if is_310p:
                return [("Total DDR Capacity(MB)", c.mem_total_mb), ("DDR Capacity(MB)", c.mem_total_mb),
                        ("DDR Clock Speed(MHz)", 3200)]
            return [("DDR Capacity(MB)", 0), ("DDR Clock Speed(MHz)", 0),
                    ("HBM Capacity(MB)", c.mem_total_mb), ("HBM Clock Speed(MHz)", 1600),
                    ("HBM Temperature(C)", max(0, c.temp_c - 3)), ("HBM Manufacturer ID", "0x1")]
        if kind == "temp":
            return [("NPU Temperature (C)", c.temp_c)]
        if kind == "power":
            return [("NPU Real-time Power(W)", "NA" if c.power_w is None else f"{c.power_w:.1f}")]
        # common
        out: list[tuple[str, object]] = [("Memory Usage Rate(%)", mem_rate if is_310p else 0)]
        if not is_310p:
            out.append(("HBM Usage Rate(%)", mem_rate))
        out += [("Aicore Usage Rate(%)", c.util_pct), ("Aicore Freq(MHZ)", 1800),
                ("Aicore curFreq(MHZ)", 1800 if c.util_pct else 800), ("Aicore Count", 24 if not is_310p else 8),
                ("Temperature(C)", c.temp_c)]
        if c.power_w is not None:
            out.append(("NPU Real-time Power(W)", f"{c.power_w:.1f}"))
        del fam
        return out

    def _health(self, c: ChipState) -> str:
        lines = [kv("Health Status", c.health)]
        if not c.error_codes:
            lines += [kv("Error Code", "NA"), kv("Error Information", "NA")]
        else:
            lines.append(kv("Error Code", " ".join(c.error_codes)))
            infos = [HEALTH_INFO.get(code, f"error code {code}") for code in c.error_codes]
            lines.append(kv("Error Information", infos[0]))
            for info in infos[1:]:
                lines.append("")
                lines.append(kv("", info))
        return "\n".join(lines) + "\n"

    def _die(self, c: ChipState, salt: str) -> str:
        return " ".join(f"{int((noise(self.config.seed, salt, c.index, k) + 1) * 2**31):08X}" for k in range(5))

    def _board_chip(self, c: ChipState) -> str:
        fam = self.family
        pairs: list[tuple[str, object]] = [("NPU ID", c.npu_id)]
        if fam.layout == "a3":
            pairs += [("NPU Name", fam.name), ("Chip ID", c.chip_id)]
        else:
            pairs += [("Chip ID", c.chip_id), ("Chip Type", "Ascend")]
        pairs += [("Chip Name", fam.chip_name), ("Chip Version", "V1"), ("Board ID", fam.board_id),
                  ("PCB ID", "NA"), ("BOM ID", 1)]
        if fam.layout == "310p":
            pairs.append(("Die ID", self._die(c, "vdie")))
        else:
            pairs += [("VDie ID", self._die(c, "vdie")), ("NDie ID", self._die(c, "ndie"))]
        pairs += [("Chip Position ID", c.index), ("PCIe Bus Info", bus_id(fam, c.index)),
                  ("Firmware Version", "7.8.0.6.201")]
        return "\n".join(kv(k, v) for k, v in pairs) + "\n\n"

    def _board_card(self, npu: int, members: list[ChipState]) -> str:
        fam = self.family
        pairs: list[tuple[str, object]] = [("NPU ID", npu)]
        if fam.layout != "310p":
            pairs += [("Product Name", "IT21HMDC_Bin5" if fam.layout == "a2" else "Atlas 900 A3"),
                      ("Model", "NA"), ("Manufacturer", "Huawei"),
                      ("Serial Number", f"1025C9{npu:02d}{self.config.seed % 10000:04d}")]
        pairs += [("Software Version", self.config.version or fam.version),
                  ("Firmware Version", "7.8.0.6.201"), ("Compatibility", "OK"),
                  ("Board ID", fam.board_id), ("PCB ID", "A"), ("BOM ID", 1),
                  ("PCIe Bus Info", bus_id(fam, members[0].index)), ("Slot ID", npu),
                  ("Class ID", "NA"), ("PCI Vendor ID", "0x19E5"), ("PCI Device ID", fam.pci_device_id),
                  ("Subsystem Vendor ID", "0x19E5"), ("Subsystem Device ID", "0x3003"),
                  ("Chip Count", len(members))]
        return "\n".join(kv(k, v) for k, v in pairs) + "\n\n"
