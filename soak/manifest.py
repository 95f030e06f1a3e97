"""Version manifest: what hardware and software a soak ran on, and drift against a lock file.

``collect_manifest()`` gathers, each value None when the host does not have it:

* host: Python, OS (``/etc/os-release``), kernel, CPU model and count;
* frameworks: torch (package metadata, no import), torch_npu (the subprocess probe of
  ``soak.device``: it is never imported here);
* Ascend: CANN (``<cann-root>/*/version.cfg``, ``version.info`` or
  ``ascend_toolkit_install.info``), driver and firmware packages
  (``/usr/local/Ascend/{driver,firmware}/version.info``), npu-smi version, and per card the
  board info from ``npu-smi info -t board -i N`` (firmware, serial, board id) and per chip
  from ``... -c M`` (chip name, version, firmware);
* NVIDIA: driver, CUDA driver version, per GPU name, serial, VBIOS, UUID (nvidia-ml-py).

``diff_manifest(locked, current)`` compares two manifests key by key (dotted paths such as
``npu.cards[0].firmware_version``); host-specific keys (host name, time) are not drift.
"""

from __future__ import annotations

import glob
import importlib.metadata
import json
import os
import platform
import socket
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from soak.errors import InputError, ToolError

SCHEMA = 1
CANN_ROOT = "/usr/local/Ascend/ascend-toolkit/latest"
DRIVER_ROOT = "/usr/local/Ascend/driver"
FIRMWARE_ROOT = "/usr/local/Ascend/firmware"
# Not drift: these differ between two healthy nodes of one cluster, or between two runs.
NOT_DRIFT = frozenset({"collected_at", "host.hostname", "host.utc_offset_s", "python_executable"})


def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _kv(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip().lower()] = value.strip().strip('"')
    return out


def _version_from(text: str) -> str | None:
    kv = _kv(text)
    for key in ("version", "toolkit_version", "runtime_running_version", "package_version"):
        if kv.get(key):
            value = kv[key].strip("[]")
            # version.cfg writes "[7.0.0.5.242:8.0.RC1]": the CANN release is after the colon
            return value.split(":")[-1] if ":" in value else value
    return None


def cann_versions(root: str | Path = CANN_ROOT) -> dict[str, Any]:
    """``{"version": str|None, "components": {dir: version}}`` from version files under root."""
    components: dict[str, str] = {}
    for pattern in ("*/version.cfg", "*/version.info", "version.cfg", "version.info",
                    "*/ascend_toolkit_install.info"):
        for path in sorted(glob.glob(os.path.join(str(root), pattern))):
            text = _read(path)
            version = _version_from(text) if text else None
            if version:
                name = Path(path).parent.name if "/" in pattern else "toolkit"
                components.setdefault(name, version)
    values = list(components.values())
    # components of one CANN install agree; if not, report the most common one
    version = max(sorted(set(values)), key=values.count) if values else None
    return {"version": version, "components": components or None}


def _os_name() -> str | None:
    text = _read("/etc/os-release")
    return _kv(text).get("pretty_name") if text else platform.platform()


def _cpu_model() -> str | None:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "Hardware") and value.strip():
            return value.strip()
    return platform.processor() or None


def _pkg(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _npu(npu_smi: str, driver_root: str | Path, runner: Any = None) -> dict[str, Any] | None:
    from soak.telemetry.npu_smi import NpuSmiReader

    reader = NpuSmiReader(npu_smi, runner=runner) if runner else NpuSmiReader(npu_smi)
    try:
        table = reader.info()
    except ToolError as exc:
        if exc.kind == "missing":
            return None
        return {"error": str(exc)}
    driver = _read(Path(driver_root) / "version.info")
    cards = []
    for npu_id in sorted({c.npu_id for c in table.chips}):
        names = sorted({c.name for c in table.chips if c.npu_id == npu_id and c.name})
        card: dict[str, Any] = {"npu_id": npu_id, "name": names[0] if names else None,
                                "chips": sum(1 for c in table.chips if c.npu_id == npu_id)}
        try:
            b = reader.board(npu_id)
            card.update(serial_number=b.serial_number, firmware_version=b.firmware_version,
                        software_version=b.software_version, board_id=b.board_id,
                        product_name=b.product_name, pcie_bus_info=b.pcie_bus_info)
        except ToolError as exc:
            card["error"] = str(exc)
        chips = []
        for chip in (c for c in table.chips if c.npu_id == npu_id):
            entry: dict[str, Any] = {"chip_id": chip.chip_id}
            try:
                cb = reader.board(npu_id, chip.chip_id)
                entry.update(chip_name=cb.chip_name, chip_version=cb.chip_version,
                             firmware_version=cb.firmware_version)
            except ToolError as exc:
                entry["error"] = str(exc)
            chips.append(entry)
        card["chip_boards"] = chips
        cards.append(card)
    soft = {c.get("software_version") for c in cards} - {None}
    return {
        "npu_smi_version": table.version,
        # the driver's own file first; the board's "Software Version" is the driver too
        "driver_version": (_version_from(driver) if driver else None)
        or (soft.pop() if len(soft) == 1 else None),
        "chip_count": len(table.chips),
        "cards": cards,
    }


def _nvidia() -> dict[str, Any] | None:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError: no driver or no GPU on this host
        return None

    def q(fn: str, *args: Any) -> Any:
        try:
            value = getattr(pynvml, fn)(*args)
        except Exception:  # NVMLError_NotSupported and friends: the value is unknown
            return None
        return value.decode() if isinstance(value, bytes) else value

    try:
        cuda = q("nvmlSystemGetCudaDriverVersion_v2") or q("nvmlSystemGetCudaDriverVersion")
        gpus = []
        for i in range(q("nvmlDeviceGetCount") or 0):
            h = q("nvmlDeviceGetHandleByIndex", i)
            gpus.append({"index": i, "name": q("nvmlDeviceGetName", h),
                         "serial": q("nvmlDeviceGetSerial", h), "uuid": q("nvmlDeviceGetUUID", h),
                         "vbios_version": q("nvmlDeviceGetVbiosVersion", h)})
        return {"driver_version": q("nvmlSystemGetDriverVersion"),
                "cuda_driver_version": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
                "gpus": gpus}
    finally:
        q("nvmlShutdown")


def local_timezone(localtime: str | Path = "/etc/localtime", tz_file: str | Path = "/etc/timezone") -> str | None:
    """The host's IANA time zone ("Asia/Shanghai"): ``$TZ``, the ``/etc/localtime`` link, or
    ``/etc/timezone``; None when the host names none (the report then uses ``utc_offset_s``)."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz and "/" in tz and not tz.startswith("/"):
        return tz
    try:
        target = os.readlink(localtime)
    except OSError:
        target = ""
    if "zoneinfo/" in target:
        return target.split("zoneinfo/", 1)[1]
    name = (_read(tz_file) or "").strip()
    return name or None


def ascend_files(driver_root: str | Path = DRIVER_ROOT,
                 firmware_root: str | Path = FIRMWARE_ROOT) -> dict[str, Any]:
    """Driver and firmware package versions from their ``version.info`` files."""
    drv = _read(Path(driver_root) / "version.info")
    fw = _read(Path(firmware_root) / "version.info")
    return {"driver_version": _version_from(drv) if drv else None,
            "firmware_version": _version_from(fw) if fw else None}


def collect_manifest(*, npu_smi: str = "npu-smi", cann_root: str | Path = CANN_ROOT,
                     driver_root: str | Path = DRIVER_ROOT,
                     firmware_root: str | Path = FIRMWARE_ROOT, probe_npu: bool = True,
                     runner: Any = None) -> dict[str, Any]:
    """The manifest of this host as a JSON-ready dict (missing values are None)."""
    from soak.device import probe_torch_npu, torch_npu_installed

    torch_npu: dict[str, Any] = {"version": _pkg("torch-npu") or _pkg("torch_npu"),
                                 "loads": None, "error": None}
    if probe_npu and torch_npu_installed():
        probe = probe_torch_npu()
        torch_npu.update(loads=probe.ok, error=probe.error,
                         version=probe.torch_npu_version or torch_npu["version"])
    return {
        "schema": SCHEMA,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": {"hostname": socket.gethostname(), "os": _os_name(), "kernel": platform.release(),
                 "machine": platform.machine(), "cpu_model": _cpu_model(),
                 "cpu_count": os.cpu_count(), "timezone": local_timezone(),
                 "utc_offset_s": -(time.altzone if time.localtime().tm_isdst > 0 else time.timezone)},
        "python": platform.python_version(),
        "packages": {"torch": _pkg("torch"), "torch_npu": torch_npu["version"],
                     "nvidia-ml-py": _pkg("nvidia-ml-py"), "soak": _pkg("soak")},
        "torch_npu": torch_npu,
        "cann": cann_versions(cann_root),
        "ascend": ascend_files(driver_root, firmware_root),
        "npu": _npu(npu_smi, driver_root, runner),
        "nvidia": _nvidia(),
        "python_executable": sys.executable,
    }


@dataclass(frozen=True)
class Drift:
    key: str  # dotted path, e.g. "npu.cards[0].firmware_version"
    locked: Any
    current: Any

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def flatten(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(obj, Mapping):
        for k in sorted(obj):
            yield from flatten(obj[k], f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from flatten(v, f"{prefix}[{i}]")
        if not obj:
            yield prefix, []
    else:
        yield prefix, obj


def diff_manifest(locked: Mapping[str, Any], current: Mapping[str, Any]) -> list[Drift]:
    """Every leaf that differs, was added or went missing (None on the missing side)."""
    a, b = dict(flatten(locked)), dict(flatten(current))
    drift = []
    for key in sorted(a.keys() | b.keys()):
        if key in NOT_DRIFT:
            continue
        if a.get(key) != b.get(key):
            drift.append(Drift(key, a.get(key), b.get(key)))
    return drift


def load_lock(path: str | Path) -> dict[str, Any]:
    from soak.tomlfile import read_regular_text

    text = read_regular_text(path, "manifest lock", InputError)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"manifest lock {path}: not JSON (line {exc.lineno})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise InputError(f"manifest lock {path}: not a soak manifest (schema {SCHEMA})")
    return data


def write_lock(path: str | Path, manifest: Mapping[str, Any]) -> None:
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p}: is a directory; name the lock file, e.g. {p / 'cluster.lock.json'}")
    tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"{p}: cannot write the lock file ({exc.strerror or exc})") from None

