"""The report's appendix: the environment manifest and the run plan as labelled tables.

What a customer reads there is what ran and how it was set up, not a dump of the records:
each group of facts is a table under a heading in the report's language, each fact has a label
(the host and software in words; a plan key as written in ``plan.toml``, so it can be looked
up), values are formatted with their unit, an empty key (unset, blank, an empty list) is left
out, local paths are reduced to what identifies them (a virtual environment's interpreter to
``python 3.11.7``, a folder under the home or the run folder to a relative path), and the
manifest's own bookkeeping (its schema number) is left out. The PDF and the app render the
same tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from soak.config import plan_units
from soak.report.i18n import t
from soak.report.model import fmt_bytes
from soak.report.units import dur, plain


@dataclass(frozen=True)
class Table:
    """One labelled table: a heading, and either (label, value) rows (``header`` None) or rows
    under ``header``."""

    title: str
    rows: tuple[tuple[str, ...], ...]
    header: tuple[str, ...] | None = None


# label of each environment fact, by its dotted key in the manifest: (en, zh)
ENV_LABELS: dict[str, tuple[str, str]] = {
    "host.hostname": ("Host name", "主机名"),
    "host.os": ("Operating system", "操作系统"),
    "host.kernel": ("Kernel", "内核"),
    "host.machine": ("Architecture", "架构"),
    "host.cpu_model": ("CPU", "CPU"),
    "host.cpu_count": ("CPU cores", "CPU 核数"),
    "host.timezone": ("Time zone", "时区"),
    "host.memory_bytes": ("Memory", "内存"),
    "collected_at": ("Recorded at", "记录时间"),
    "python": ("Python", "Python"),
    "python_executable": ("Python interpreter", "Python 解释器"),
    "torch_npu.version": ("torch_npu (loaded)", "torch_npu（已加载）"),
    "torch_npu.loads": ("torch_npu loads", "torch_npu 可加载"),
    "torch_npu.error": ("torch_npu error", "torch_npu 错误"),
    "cann.version": ("CANN", "CANN"),
    "cann.components": ("CANN components", "CANN 组件"),
    "ascend.driver_version": ("Ascend driver", "昇腾驱动"),
    "ascend.firmware_version": ("Ascend firmware", "昇腾固件"),
    "npu.npu_smi_version": ("npu-smi", "npu-smi"),
    "npu.driver_version": ("NPU driver (npu-smi)", "NPU 驱动（npu-smi）"),
    "npu.chip_count": ("NPU chips", "NPU 芯片数"),
    "nvidia.driver_version": ("NVIDIA driver", "NVIDIA 驱动"),
    "nvidia.cuda_driver_version": ("CUDA (driver)", "CUDA（驱动）"),
}
# the group each fact belongs to (the first part of its key); what no group names is "other"
_ENV_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("app_host", ("host", "collected_at")),
    ("app_software", ("python", "python_executable", "packages", "torch_npu", "cann", "ascend", "npu", "nvidia")),
)
# the manifest's bookkeeping, not a fact about the machine
_ENV_SKIP = {"schema", "host.utc_offset_s"}
# a card or GPU: (key in the manifest, column heading)
_CARD_COLUMNS = (("npu_id", "app_npu"), ("name", "model"), ("chips", "chips"), ("serial_number", "serial"),
                 ("firmware_version", "app_firmware"), ("pcie_bus_info", "app_bus"))
_GPU_COLUMNS = (("index", "app_gpu"), ("name", "model"), ("serial", "serial"), ("vbios_version", "app_vbios"),
                ("uuid", "app_uuid"))


def _empty(v: Any) -> bool:
    return v is None or v == "" or (isinstance(v, Sequence | Mapping) and not isinstance(v, str) and len(v) == 0)


def _flat(value: Any, prefix: str, out: list[tuple[str, Any]]) -> None:
    """(dotted key, leaf value) of every non-empty leaf; a list of records is one leaf each."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flat(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif not _empty(value):
        out.append((prefix, value))


def local_path(value: str, *, home: str | None = None, run_dir: str | None = None, python: str | None = None) -> str:
    """A path of the machine that ran as the report shows it: an interpreter as ``python
    3.11.7``, a path under the run folder relative to it, one under the home as ``~/...``;
    anything else as written."""
    p = PurePosixPath(value)
    if not p.is_absolute():
        return value
    if p.name.startswith("python") and p.parent.name == "bin":
        return f"python {python}" if python else p.name
    for base, shown in ((run_dir, None), (home, "~")):
        if base and PurePosixPath(base).is_absolute():
            try:
                rel = p.relative_to(base)
            except ValueError:
                continue
            return str(rel) if shown is None else f"{shown}/{rel}" if str(rel) != "." else shown
    return value


def _label(key: str, lang: str) -> str:
    pair = ENV_LABELS.get(key)
    if pair is not None:
        return pair[1] if lang == "zh" else pair[0]
    if key.startswith("packages."):
        return key.split(".", 1)[1]
    return key


def environment_tables(env: Mapping[str, Any] | None, lang: str = "en", *, home: str | None = None,
                       run_dir: str | None = None) -> list[Table]:
    """The environment manifest as tables: the host, the software, the cards (or GPUs), and
    whatever else it recorded."""
    if not env:
        return []
    facts: list[tuple[str, Any]] = []
    cards: Sequence[Mapping[str, Any]] = ()
    gpus: Sequence[Mapping[str, Any]] = ()
    for k, v in env.items():
        if k == "npu" and isinstance(v, Mapping):
            cards = v.get("cards") or ()
            v = {sk: sv for sk, sv in v.items() if sk != "cards"}
        if k == "nvidia" and isinstance(v, Mapping):
            gpus = v.get("gpus") or ()
            v = {sk: sv for sk, sv in v.items() if sk != "gpus"}
        _flat(v, k, facts)
    python = env.get("python") if isinstance(env.get("python"), str) else None
    groups: dict[str, list[tuple[str, str]]] = {name: [] for name, _ in _ENV_GROUPS}
    groups["app_other"] = []
    for key, value in facts:
        if key in _ENV_SKIP:
            continue
        text = plain(value)
        if isinstance(value, str):
            text = local_path(value, home=home, run_dir=run_dir, python=python)
            if key == "collected_at":
                text = value.replace("T", " ").replace("Z", " UTC")
        elif key.endswith("_bytes") and isinstance(value, int | float):
            text = fmt_bytes(value)
        head = key.split(".", 1)[0]
        group = next((name for name, heads in _ENV_GROUPS if head in heads), "app_other")
        groups[group].append((_label(key, lang), text))
    out = [Table(t(name, lang), tuple(rows)) for name, rows in groups.items() if rows]
    for title, items, columns in (("app_cards", cards, _CARD_COLUMNS), ("app_gpus", gpus, _GPU_COLUMNS)):
        rows = tuple(tuple("N/A" if _empty(c.get(k)) else plain(c.get(k)) for k, _ in columns)
                     for c in items if isinstance(c, Mapping))
        if rows:
            out.append(Table(t(title, lang), rows, tuple(t(h, lang) for _, h in columns)))
    return out


def plan_tables(plan: Mapping[str, Any] | None, lang: str = "en", *, home: str | None = None,
                run_dir: str | None = None) -> list[Table]:
    """The run plan as one table per section of ``plan.toml``, keys as written there, values
    with their units; a section with nothing set is left out."""
    if not plan:
        return []
    units = plan_units()
    out: list[Table] = []
    # keys outside any section (a plan stored flat, as by an earlier soak or another tool):
    # one table of their own, first, so no key of the plan goes unsaid
    top = {k: v for k, v in plan.items() if not _is_section(v)}
    if top:
        out += plan_tables({"": top}, lang, home=home, run_dir=run_dir)
    for section, body in plan.items():
        if not _is_section(body):
            continue
        items = body if isinstance(body, list) else [body]
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                continue
            facts: list[tuple[str, Any]] = []
            _flat(item, "", facts)
            rows = []
            for key, value in facts:
                unit = units.get(f"{section}[].{key}" if isinstance(body, list) else f"{section}.{key}")
                if unit == "s" and isinstance(value, int | float) and not isinstance(value, bool):
                    text = dur(value)
                elif unit == "bytes" and isinstance(value, int | float) and not isinstance(value, bool):
                    text = fmt_bytes(value)
                elif isinstance(value, str):
                    text = local_path(value, home=home, run_dir=run_dir)
                else:
                    text = plain(value)
                rows.append((key, text))
            if rows:
                title = _section_title(section, lang)
                out.append(Table(f"{title} {i + 1}" if len(items) > 1 else title, tuple(rows)))
    return out


def _is_section(body: Any) -> bool:
    """A ``[section]`` (a table) or ``[[section]]`` (a list of tables) of plan.toml."""
    return isinstance(body, Mapping) or (isinstance(body, list) and bool(body)
                                         and all(isinstance(x, Mapping) for x in body))


def _section_title(section: str, lang: str) -> str:
    if not section:
        return t("plan_title", lang)
    key = f"plan_{section}"
    name = t(key, lang)
    return section if name == key else name


# the detectors that are not a finding's kind, and the sections of the acceptance profile
DETECTOR_NAMES: dict[str, tuple[str, str]] = {
    "peers": ("comparison among peers (outliers, stragglers)", "同类比较（离群芯片、掉队节点）"),
    "links": ("links between nodes", "节点间链路"),
}
PROFILE_SECTIONS: dict[str, tuple[str, str]] = {
    "chips": ("chip figures", "芯片参数"), "compute": ("compute", "算力"), "evidence": ("evidence", "证据"),
    "faults": ("device faults", "芯片故障"), "links": ("links between nodes", "节点间链路"),
    "peers": ("comparison among peers", "同类比较"), "severity": ("severity by kind", "各类问题的严重级别"),
}


def detector_name(name: str, lang: str = "en") -> str:
    """A detector as the report names it: its finding kind's name, or its own."""
    from soak.report.names import kind_name, pick

    if name == "profile":
        return t("profile", lang)
    return pick(DETECTOR_NAMES, name, lang) if name in DETECTOR_NAMES else kind_name(name, lang)


def _without_notes(value: Any) -> Any:
    """A profile's figures without their notes (``*_source``: where a figure comes from, for
    whoever maintains the profile)."""
    if isinstance(value, Mapping):
        return {k: _without_notes(v) for k, v in value.items() if not str(k).endswith(("_source", "_note", "notes"))}
    return value


def detector_thresholds(name: str, thresholds: Mapping[str, Any], lang: str = "en") -> dict[str, Any]:
    """A detector's thresholds as the report lists them: the profile's without its notes and
    with its sections named in the report's language."""
    if name != "profile":
        return dict(thresholds)
    from soak.report.names import pick

    out = _without_notes(thresholds)
    return {pick(PROFILE_SECTIONS, k, lang) if isinstance(v, Mapping) else k: v for k, v in out.items()}


def appendix_tables(manifest: Mapping[str, Any], run_id: str, lang: str = "en") -> tuple[list[Table], list[Table]]:
    """The environment's tables and the plan's, paths reduced against this user's home and the
    run's folder (the plan's data folder and the run id)."""
    import os

    plan = manifest.get("plan") or {}
    data_dir = (plan.get("run") or {}).get("data_dir") if isinstance(plan, Mapping) else None
    where = {"home": os.path.expanduser("~"),
             "run_dir": os.path.join(data_dir, run_id) if isinstance(data_dir, str) else None}
    return environment_tables(manifest.get("environment"), lang, **where), plan_tables(plan, lang, **where)
