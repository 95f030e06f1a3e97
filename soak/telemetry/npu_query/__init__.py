"""The key/value views of npu-smi: ``info -t usages|common|temp|power|health|ecc|board|memory``,
``info -m`` and ``info -l``.

One module per job, their public names gathered here so a caller writes
``from soak.telemetry import npu_query as q`` and ``q.parse_usages(...)``:

* ``lines``: key/value lines split, grouped by chip (``Chip ID`` before or after a chip's
  values, found from the text) and turned into records;
* ``readings``: the views that fill DeviceSample fields (rates, temperature, power,
  health, ECC counts);
* ``inventory``: what hardware is there (memory, board, ``-m`` mapping, ``-l`` card list);
* ``details``: records merged into DeviceSample fields, and the slow views read for a chip.
"""

from __future__ import annotations

from soak.telemetry.npu_query.details import read_chip_details, sample_fields
from soak.telemetry.npu_query.inventory import (
    BoardInfo,
    CardEntry,
    CardList,
    ChipMapping,
    MemoryInfo,
    parse_board,
    parse_card_list,
    parse_mapping,
    parse_memory,
)
from soak.telemetry.npu_query.lines import kv_lines, split_chips
from soak.telemetry.npu_query.readings import (
    CommonInfo,
    EccInfo,
    HealthInfo,
    PowerInfo,
    TempInfo,
    UsageInfo,
    parse_common,
    parse_ecc,
    parse_health,
    parse_power,
    parse_temp,
    parse_usages,
)

__all__ = [
    "BoardInfo",
    "CardEntry",
    "CardList",
    "ChipMapping",
    "CommonInfo",
    "EccInfo",
    "HealthInfo",
    "MemoryInfo",
    "PowerInfo",
    "TempInfo",
    "UsageInfo",
    "kv_lines",
    "parse_board",
    "parse_card_list",
    "parse_common",
    "parse_ecc",
    "parse_health",
    "parse_mapping",
    "parse_memory",
    "parse_power",
    "parse_temp",
    "parse_usages",
    "read_chip_details",
    "sample_fields",
    "split_chips",
]
