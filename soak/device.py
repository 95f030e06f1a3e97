"""One small abstraction over the three device backends soak trains on.

=========  ==================  =============  ==========================================
backend    device string       distributed    memory numbers
=========  ==================  =============  ==========================================
``npu``    ``npu:<local>``     ``hccl``       ``torch.npu`` allocator (torch_npu)
``cuda``   ``cuda:<local>``    ``nccl``       ``torch.cuda`` allocator
``cpu``    ``cpu``             ``gloo``       allocator numbers are None (no device
                                              allocator); the process RSS is reported
                                              separately as ``host_rss_bytes``
=========  ==================  =============  ==========================================

Why torch_npu is probed in a subprocess first: torch >= 2.5 auto-loads installed backend
extensions on ``import torch``. A torch_npu wheel on a host without CANN (or without
``set_env.sh`` sourced) therefore breaks ``import torch`` for the whole process with
"Failed to load the backend extension: torch_npu". ``probe_torch_npu`` runs
``python -c "import torch, torch_npu"`` with a timeout, so a broken install becomes one clear
``DeviceUnavailable`` message instead of a crash. This module never imports torch at module
level, and never uses ``transfer_to_npu`` (it monkey-patches ``torch.cuda``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from soak.errors import DeviceUnavailable

BACKENDS = ("npu", "cuda", "cpu")
DIST_BACKEND = {"npu": "hccl", "cuda": "nccl", "cpu": "gloo"}
CANN_SET_ENV = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
FIX_HINT = (
    f"source the CANN environment (`source {CANN_SET_ENV}`), "
    "or set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to run on CPU/CUDA"
)


@dataclass(frozen=True)
class NpuProbe:
    """Result of importing torch + torch_npu in a child process."""

    installed: bool  # a torch_npu package is importable by name (found, not imported)
    ok: bool  # the child imported both and exited 0
    torch_npu_version: str | None = None
    device_count: int | None = None
    error: str | None = None  # last line of the child's stderr, or why it could not run


def torch_npu_installed() -> bool:
    # find_spec only locates the package; it does not run its code.
    return importlib.util.find_spec("torch_npu") is not None


_PROBE_CODE = (
    "import torch, torch_npu\n"
    "print(getattr(torch_npu, '__version__', ''))\n"
    "print(torch.npu.device_count() if hasattr(torch, 'npu') else 0)\n"
)


def probe_torch_npu(timeout_s: float = 60.0, python: str | None = None) -> NpuProbe:
    """Import torch and torch_npu in a child process; never in this one.

    Command line equivalent: ``python -c "import torch, torch_npu"``.
    """
    if not torch_npu_installed():
        return NpuProbe(installed=False, ok=False, error="torch_npu is not installed")
    env = dict(os.environ)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)  # the probe must see what a real run sees
    try:
        proc = subprocess.run(
            [python or sys.executable, "-c", _PROBE_CODE],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return NpuProbe(True, False, error=f"import torch_npu took longer than {timeout_s:g} s")
    except OSError as exc:
        return NpuProbe(True, False, error=f"cannot start {python or sys.executable}: {exc}")
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        return NpuProbe(True, False, error=lines[-1] if lines else f"exit {proc.returncode}")
    out = proc.stdout.split()
    version = out[0] if out else None
    count = int(out[1]) if len(out) > 1 and out[1].isdigit() else None
    return NpuProbe(True, True, torch_npu_version=version, device_count=count)


def require_npu(probe: NpuProbe | None = None) -> NpuProbe:
    """Raise ``DeviceUnavailable`` with the fix when torch_npu cannot be imported."""
    probe = probe or probe_torch_npu()
    if not probe.ok:
        raise DeviceUnavailable(f"torch_npu cannot be loaded ({probe.error}): {FIX_HINT}")
    return probe


def detect_backend(force: str | None = "auto", *, probe: NpuProbe | None = None) -> str:
    """Pick ``npu`` then ``cuda`` then ``cpu``; ``force`` names one and fails if it is absent.

    With auto-detection, a torch_npu that cannot load is an error unless
    ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` is set, because such a package would break
    ``import torch`` anyway.
    """
    force = force or "auto"
    if force not in (*BACKENDS, "auto"):
        raise DeviceUnavailable(f"unknown device backend {force!r}: use auto, npu, cuda or cpu")
    autoload_off = os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD") == "0"
    if force == "npu" or (force == "auto" and torch_npu_installed()):
        probe = probe or probe_torch_npu()
        if probe.ok and (probe.device_count or 0) > 0:
            return "npu"
        if force == "npu":
            if probe.ok:
                raise DeviceUnavailable("torch_npu loads but sees no NPU: check npu-smi info")
            require_npu(probe)
        if probe.installed and not probe.ok and not autoload_off:
            require_npu(probe)
    import torch

    if force == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable("backend cuda requested but torch.cuda.is_available() is False")
    if force in ("cuda", "auto") and torch.cuda.is_available():
        return "cuda"
    return "cpu"


@dataclass(frozen=True)
class MemoryStats:
    allocated_bytes: int | None
    reserved_bytes: int | None
    peak_bytes: int | None


@dataclass(frozen=True)
class Device:
    """The chosen backend for one rank. Build with ``Device.create``."""

    backend: str  # npu | cuda | cpu
    local_rank: int = 0

    @classmethod
    def create(cls, backend: str = "auto", local_rank: int = 0) -> Device:
        name = detect_backend(backend)
        if name == "npu":
            import torch_npu  # noqa: F401  (probe passed, so this import is safe)
        return cls(name, local_rank)

    @property
    def dist_backend(self) -> str:
        return DIST_BACKEND[self.backend]

    @property
    def name(self) -> str:
        """The torch device string, e.g. ``npu:3``."""
        return "cpu" if self.backend == "cpu" else f"{self.backend}:{self.local_rank}"

    def torch_device(self) -> Any:
        import torch

        return torch.device(self.name)

    def set_current(self) -> None:
        if self.backend != "cpu":
            self._module().set_device(self.local_rank)

    def _module(self) -> Any:
        import torch

        return getattr(torch, self.backend)

    def device_count(self) -> int:
        return 1 if self.backend == "cpu" else int(self._module().device_count())

    def synchronize(self) -> None:
        if self.backend != "cpu":
            self._module().synchronize(self.local_rank)

    def memory(self) -> MemoryStats:
        """Framework allocator numbers; all None on CPU (see ``host_rss_bytes``)."""
        if self.backend == "cpu":
            return MemoryStats(None, None, None)
        m = self._module()
        i = self.local_rank
        return MemoryStats(
            int(m.memory_allocated(i)), int(m.memory_reserved(i)), int(m.max_memory_allocated(i))
        )

    def mem_get_info(self) -> tuple[int, int] | None:
        """(free, total) bytes of this device; None on CPU."""
        if self.backend == "cpu":
            return None
        free, total = self._module().mem_get_info(self.local_rank)
        return int(free), int(total)

    def empty_cache(self) -> None:
        if self.backend != "cpu":
            self._module().empty_cache()

    def total_memory_bytes(self) -> int | None:
        if self.backend == "cpu":
            try:
                import psutil

                return int(psutil.virtual_memory().available)
            except Exception:  # psutil missing or /proc unreadable
                return None
        return int(self._module().mem_get_info(self.local_rank)[1])

    def autocast_dtype(self) -> Any:
        """bf16 on devices that support it; None (plain fp32) on CPU and old GPUs."""
        import torch

        if self.backend == "npu":
            return torch.bfloat16
        if self.backend == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return None

    def rng_state(self) -> Any:
        return None if self.backend == "cpu" else self._module().get_rng_state(self.local_rank)

    def set_rng_state(self, state: Any) -> None:
        if state is not None and self.backend != "cpu":
            self._module().set_rng_state(state, self.local_rank)


def host_rss_bytes() -> int | None:
    """This process's resident set size, read cheaply from /proc (psutil as fallback)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        try:
            import psutil

            return int(psutil.Process().memory_info().rss)
        except Exception:  # no psutil, or a platform without RSS
            return None
