"""Fault-code tables: what a chip's own fault report means and how it weighs in the verdict.

``soak.faultcodes.table`` holds the tables and the severity rule; docs/faults.md describes
their sources and how an operator supplies their own ``faultCode.json``.
"""

from __future__ import annotations

from soak.faultcodes.table import (
    ASCEND_LEVELS,
    FREE_RESTART_NPU,
    HARDWARE_XID_CLASSES,
    NOT_HANDLE,
    PRE_SEPARATE_NPU,
    RESTART_BUSINESS,
    RESTART_NPU,
    RESTART_REQUEST,
    SEPARATE_NPU,
    SUB_HEALTH,
    UNKNOWN,
    FaultCode,
    FaultTable,
    builtin_table,
    interrupts_training,
    is_hardware,
    load_table,
)

__all__ = [
    "ASCEND_LEVELS",
    "FREE_RESTART_NPU",
    "HARDWARE_XID_CLASSES",
    "NOT_HANDLE",
    "PRE_SEPARATE_NPU",
    "RESTART_BUSINESS",
    "RESTART_NPU",
    "RESTART_REQUEST",
    "SEPARATE_NPU",
    "SUB_HEALTH",
    "UNKNOWN",
    "FaultCode",
    "FaultTable",
    "builtin_table",
    "interrupts_training",
    "is_hardware",
    "load_table",
]
