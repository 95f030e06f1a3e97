"""The host and the workload's process tree, through psutil.

``HostReader.read()`` mirrors ``free -b`` (host memory), ``ps`` over the workload's process
tree (summed RSS and CPU %) and ``df`` of the run folder. ``cpu_device_sample`` turns a host
reading into the ``cpu`` device of the cpu backend (utilization = system CPU %).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Iterable

import psutil

from soak.telemetry.records import DeviceSample, HostSample

PidProvider = Callable[[], "int | Iterable[int] | None"]


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware")):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


class HostReader:
    """Reads host memory, system CPU, the workload tree and the run folder's free disk.

    ``pid_provider`` returns the workload's root pid(s) (None: no workload now). CPU
    percentages are measured between two calls (psutil's non-blocking form), so the first
    reading of a process reports None rather than a made-up 0.
    """

    def __init__(self, pid_provider: PidProvider | None = None, run_dir: str | os.PathLike[str] | None = None) -> None:
        self.pid_provider = pid_provider
        self.run_dir = run_dir
        self._procs: dict[int, psutil.Process] = {}
        self._cpu_primed = False
        self.cpu_model = _cpu_model()

    def _roots(self) -> list[int]:
        if self.pid_provider is None:
            return []
        got = self.pid_provider()
        if got is None:
            return []
        return [int(got)] if isinstance(got, int) else [int(p) for p in got]

    def _tree(self) -> tuple[int | None, float | None]:
        roots = self._roots()
        if not roots:
            self._procs.clear()
            return None, None
        seen: dict[int, psutil.Process] = {}
        for pid in roots:
            try:
                root = self._procs.get(pid) or psutil.Process(pid)
                seen[pid] = root
                for child in root.children(recursive=True):
                    seen[child.pid] = self._procs.get(child.pid) or child
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        rss = 0
        cpu: float | None = 0.0
        any_alive = False
        for pid, proc in seen.items():
            try:
                with proc.oneshot():
                    rss += proc.memory_info().rss
                    pct = proc.cpu_percent(None)
                any_alive = True
                if pid not in self._procs:
                    cpu = None  # first look at this process: no interval to measure over
                elif cpu is not None:
                    cpu += pct
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        self._procs = seen
        if not any_alive:
            return None, None
        return rss, cpu

    def read(self) -> HostSample:
        vm = psutil.virtual_memory()
        cpu = psutil.cpu_percent(None)
        if not self._cpu_primed:  # psutil's first non-blocking call has no interval: 0.0
            self._cpu_primed = True
            cpu_pct: float | None = None
        else:
            cpu_pct = float(cpu)
        rss, wcpu = self._tree()
        disk_free = None
        if self.run_dir is not None:
            try:
                disk_free = int(psutil.disk_usage(os.fspath(self.run_dir)).free)
            except OSError:
                disk_free = None
        return HostSample(
            mem_used_bytes=int(vm.total - vm.available),
            mem_total_bytes=int(vm.total),
            cpu_pct=cpu_pct,
            workload_rss_bytes=rss,
            workload_cpu_pct=wcpu,
            disk_free_bytes=disk_free,
        )


def cpu_device_sample(host: HostSample, model: str | None = None) -> DeviceSample:
    """The host CPU as a device: utilization = system CPU %, memory = host RAM (as ``ddr``)."""
    return DeviceSample(
        device="cpu",
        backend="cpu",
        up=True,
        model=model,
        util_pct=host.cpu_pct,
        ddr_used_bytes=host.mem_used_bytes,
        ddr_total_bytes=host.mem_total_bytes,
    )
