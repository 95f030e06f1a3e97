"""Reading Ascend chips through ``npu-smi``: the reader, and its views as DeviceSamples.

``NpuSmiReader`` runs every view through the one runner and parses it (the table in
``npu_table``, the key/value views in ``npu_query``); ``to_device_samples`` turns a table,
plus the fields the key/value views add, into one DeviceSample per chip.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from soak.errors import InputError, ToolError
from soak.telemetry import npu_query as q
from soak.telemetry.npu_table import InfoTable, parse_info_table
from soak.telemetry.npu_values import healthy_of
from soak.telemetry.records import DeviceSample
from soak.telemetry.runner import Runner, RunnerLike

T = TypeVar("T")

MIB = 1024 * 1024


# ---------------------------------------------------------------------------- samples


def device_key(npu_id: int, chip_id: int) -> str:
    """The stable device key for an Ascend chip (store, labels, traces)."""
    return f"npu{npu_id}-{chip_id}"


def _bytes(mb: int | None) -> int | None:
    return None if mb is None else int(mb) * MIB


def to_device_samples(
    table: InfoTable, details: Mapping[tuple[int, int], Mapping[str, object]] | None = None
) -> list[DeviceSample]:
    """One DeviceSample per chip of ``table``.

    ``details`` maps ``(npu_id, chip_id)`` to extra DeviceSample fields read by the key/value
    queries (ECC counts, AI CPU rate, serial, ...; see ``npu_query``); they fill what the
    table lacks and override what it has.

    HBM comes from the HBM column when the layout has one; the Memory column is then DDR.
    Without an HBM column (310, 310P, 310B) the Memory column is the chip's only memory and
    is reported as DDR. A DDR total of 0 next to an HBM column means "no DDR reported"
    (910B/A3 print a hard-coded 0), so it becomes None rather than a 0-byte memory.
    """
    proc_mem: dict[tuple[int, int], int] = {}
    for p in table.processes:
        key = (p.npu_id, p.chip_id)
        proc_mem[key] = proc_mem.get(key, 0) + (p.memory_mb or 0)
    samples = []
    for c in table.chips:
        key = (c.npu_id, c.chip_id)
        ddr_used, ddr_total = c.memory_used_mb, c.memory_total_mb
        if table.has_hbm_column and not ddr_total:
            ddr_used = ddr_total = None
        if table.has_process_section:
            process_bytes: int | None = proc_mem.get(key, 0) * MIB
        else:
            process_bytes = None
        fields: dict[str, object] = dict(
            device=device_key(c.npu_id, c.chip_id),
            backend="npu",
            up=True,
            model=c.name,
            npu_id=c.npu_id,
            chip_id=c.chip_id,
            bus_id=c.bus_id,
            health=c.health,
            healthy=healthy_of(c.health),
            util_pct=None if c.aicore_util_pct is None else float(c.aicore_util_pct),
            temp_c=None if c.temp_c is None else float(c.temp_c),
            power_w=c.power_w,
            hbm_used_bytes=_bytes(c.hbm_used_mb),
            hbm_total_bytes=_bytes(c.hbm_total_mb),
            ddr_used_bytes=_bytes(ddr_used),
            ddr_total_bytes=_bytes(ddr_total),
            process_memory_bytes=process_bytes,
        )
        if details and key in details:
            fields.update(details[key])
        samples.append(DeviceSample(**fields))  # type: ignore[arg-type]
    return samples


# ---------------------------------------------------------------------------- reader


class NpuSmiReader:
    """Reads Ascend chips through ``npu-smi``. Every call goes through ``runner``.

    Each method names its command line equivalent. Failures raise ToolError (``missing``,
    ``timeout``, ``exit``, ``error_text``, or ``garbage`` for output that is not the
    expected view); the caller turns that into a marked gap.
    """

    def __init__(self, npu_smi: str = "npu-smi", runner: RunnerLike | None = None) -> None:
        self.npu_smi = npu_smi
        self.runner: RunnerLike = runner if runner is not None else Runner()

    def _query(self, parse: Callable[..., T], *args: str, **kwargs: object) -> T:
        result = self.runner([self.npu_smi, *args])
        source = " ".join([self.npu_smi, *args])
        try:
            return parse(result.stdout, source=source, **kwargs)
        except InputError as exc:
            # from a live tool, unreadable output is the tool's failure, not the user's
            raise ToolError(self.npu_smi, str(exc), kind="garbage") from None

    @staticmethod
    def _ids(npu_id: int, chip_id: int | None) -> tuple[str, ...]:
        ids = ("-i", str(npu_id))
        return ids if chip_id is None else (*ids, "-c", str(chip_id))

    def info(self) -> InfoTable:
        """The main table. Command line equivalent: ``npu-smi info``."""
        return self._query(parse_info_table, "info")

    def usages(self, npu_id: int, chip_id: int | None = None) -> tuple[q.UsageInfo, ...]:
        """Rates in percent per chip. ``npu-smi info -t usages -i N [-c M]``."""
        return self._query(q.parse_usages, "info", "-t", "usages", *self._ids(npu_id, chip_id))

    def common(self, npu_id: int, chip_id: int | None = None) -> tuple[q.CommonInfo, ...]:
        """Frequencies, temperature (C), power (W). ``npu-smi info -t common -i N [-c M]``."""
        return self._query(q.parse_common, "info", "-t", "common", *self._ids(npu_id, chip_id))

    def temp(self, npu_id: int, chip_id: int | None = None) -> tuple[q.TempInfo, ...]:
        """Chip and board sensor temperatures (C). ``npu-smi info -t temp -i N [-c M]``."""
        return self._query(q.parse_temp, "info", "-t", "temp", *self._ids(npu_id, chip_id))

    def power(self, npu_id: int, chip_id: int | None = None) -> tuple[q.PowerInfo, ...]:
        """Real-time power (W). ``npu-smi info -t power -i N [-c M]``."""
        return self._query(q.parse_power, "info", "-t", "power", *self._ids(npu_id, chip_id))

    def health(self, npu_id: int, chip_id: int = 0) -> q.HealthInfo:
        """Health word, error codes and texts. ``npu-smi info -t health -i N -c M``."""
        return self._query(
            q.parse_health,
            "info",
            "-t",
            "health",
            *self._ids(npu_id, chip_id),
            npu_id=npu_id,
            chip_id=chip_id,
        )

    def ecc(self, npu_id: int, chip_id: int | None = None) -> tuple[q.EccInfo, ...]:
        """ECC error counts (HBM, DDR). ``npu-smi info -t ecc -i N [-c M]``."""
        return self._query(q.parse_ecc, "info", "-t", "ecc", *self._ids(npu_id, chip_id))

    def board(self, npu_id: int, chip_id: int | None = None) -> q.BoardInfo:
        """Card (or chip, with ``chip_id``) identity. ``npu-smi info -t board -i N [-c M]``."""
        return self._query(q.parse_board, "info", "-t", "board", *self._ids(npu_id, chip_id))

    def memory(self, npu_id: int, chip_id: int | None = None) -> tuple[q.MemoryInfo, ...]:
        """Capacities (MB), clocks (MHz). ``npu-smi info -t memory -i N [-c M]``."""
        return self._query(q.parse_memory, "info", "-t", "memory", *self._ids(npu_id, chip_id))

    def mapping(self) -> tuple[q.ChipMapping, ...]:
        """NPU id / chip / logic id / chip name rows. ``npu-smi info -m``."""
        return self._query(q.parse_mapping, "info", "-m")

    def card_list(self) -> q.CardList:
        """Cards and their chip counts. ``npu-smi info -l``."""
        return self._query(q.parse_card_list, "info", "-l")
