"""Preflight: is this node fit to start a soak? Each check says pass, fail, skip or warn,
what it measured and why.

======================  =============================================================
check                   what it does
======================  =============================================================
``adapter``             torch_npu imports (in a child process, see ``soak.device``)
``backend``             the device backend chosen, and how many devices it sees
``npu_smi``             npu-smi lists every expected chip and each says ``OK``
``matmul``              a fixed-seed product on each device matches a CPU float64
                        reference within the dtype tolerance
``memory``              each device can allocate and fill a fraction of its memory
                        (CPU: a bounded host allocation)
``collective``          all_reduce + all_gather across all devices, exact, in child
                        processes with a bounded timeout (CPU: 2 gloo ranks)
``disk_free``           free space where the run folder goes
``host_memory``         available host memory
``manifest_drift``      versions against a lock file (``soak manifest lock``)
======================  =============================================================

As in ``dcgmi diag``, a failed check does not stop the others. ``run_preflight`` is the API
the daemon calls; ``soak preflight`` prints the same records.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from soak.errors import DeviceUnavailable, InputError, ToolError

STATUSES = ("pass", "fail", "skip", "warn")
CHECKS = ("adapter", "backend", "npu_smi", "matmul", "memory", "collective", "disk_free",
          "host_memory", "manifest_drift")
GiB = 2**30
MATMUL_TOL = {"float32": 1e-4, "bfloat16": 2e-2}  # max |dev - ref| / max |ref|


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # pass | fail | skip | warn
    value: Any = None  # what was measured (None when nothing was)
    unit: str | None = None
    reason: str | None = None
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PreflightResult:
    backend: str | None
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    @property
    def status(self) -> str:
        states = {c.status for c in self.checks}
        return "fail" if "fail" in states else "warn" if "warn" in states else "pass"

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "backend": self.backend,
                "checks": [c.to_dict() for c in self.checks]}


def _timed(name: str, fn: Callable[[], Check]) -> Check:
    t0 = time.perf_counter()
    try:
        check = fn()
    except (DeviceUnavailable, ToolError, InputError) as exc:
        check = Check(name, "fail", reason=str(exc))
    except Exception as exc:  # a broken device surfaces here as a runtime error: a failed check
        check = Check(name, "fail", reason=f"{type(exc).__name__}: {exc}"[:500])
    return Check(check.name, check.status, check.value, check.unit, check.reason,
                 round(time.perf_counter() - t0, 3))


# ------------------------------------------------------------------------------ checks


def _backend_check(chosen: str, count: int, expect_chips: int | None, smi_counts: bool) -> Check:
    """The backend in use and its device count, judged against ``--expect-chips``.

    The cpu backend is one device and shows no chips: with ``--expect-chips`` it leaves the
    count to the npu_smi check when that runs, and otherwise fails with 0 chips found.
    """
    if expect_chips is None:
        return Check("backend", "pass", count, "devices", f"{chosen}: {count} device(s)")
    if chosen == "cpu":
        if smi_counts:
            return Check("backend", "pass", count, "devices",
                         f"cpu: {count} device(s), no accelerator; chips are counted by npu_smi")
        return Check("backend", "fail", 0, "chips",
                     f"cpu: no accelerator, 0 chips found, {expect_chips} expected (--expect-chips)")
    if count != expect_chips:
        return Check("backend", "fail", count, "devices",
                     f"{chosen}: {count} device(s) found, {expect_chips} expected (--expect-chips)")
    return Check("backend", "pass", count, "devices", f"{chosen}: {count} device(s), as expected")


def check_adapter(backend: str, probe: Any = None) -> Check:
    from soak.device import FIX_HINT, probe_torch_npu, torch_npu_installed

    if not torch_npu_installed():
        if backend == "npu":
            return Check("adapter", "fail", reason=f"torch_npu is not installed; {FIX_HINT}")
        return Check("adapter", "skip", reason="torch_npu is not installed (not an Ascend host)")
    probe = probe or probe_torch_npu()
    if not probe.ok and backend != "npu" and os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD") == "0":
        return Check("adapter", "warn", reason=f"torch_npu cannot be loaded ({probe.error}); "
                     "running without it because TORCH_DEVICE_BACKEND_AUTOLOAD=0")
    if not probe.ok:
        return Check("adapter", "fail",
                     reason=f"torch_npu cannot be loaded ({probe.error}): {FIX_HINT}")
    return Check("adapter", "pass", value=probe.torch_npu_version,
                 reason=f"torch_npu imports; {probe.device_count} NPU(s) visible")


def check_npu_smi(npu_smi: str, expect_chips: int | None, required: bool) -> Check:
    from soak.telemetry.npu_smi import NpuSmiReader

    if shutil.which(npu_smi) is None:
        if required and expect_chips is not None:
            return Check("npu_smi", "fail", reason=f"{npu_smi} not found: no chips counted, "
                         f"{expect_chips} expected (--expect-chips)")
        status = "fail" if required else "skip"
        return Check("npu_smi", status, reason=f"{npu_smi} not found")
    reader = NpuSmiReader(npu_smi)
    table = reader.info()
    chips = table.chips
    problems = []
    if expect_chips is not None and len(chips) != expect_chips:
        problems.append(f"expected {expect_chips} chips, npu-smi lists {len(chips)}")
    for c in chips:
        if c.health != "OK":
            detail = ""
            try:
                h = reader.health(c.npu_id, c.chip_id)
                detail = f" codes {','.join(h.error_codes)}" if h.error_codes else ""
            except ToolError:
                pass
            problems.append(f"npu {c.npu_id} chip {c.chip_id} health {c.health or 'N/A'}{detail}")
    if problems:
        return Check("npu_smi", "fail", len(chips), "chips", "; ".join(problems))
    return Check("npu_smi", "pass", len(chips), "chips",
                 f"all chips OK (npu-smi {table.version or 'version N/A'})")


def _devices(backend: str, count: int) -> list[Any]:
    from soak.device import Device

    return [Device(backend, i) for i in range(count if backend != "cpu" else 1)]


def check_matmul(backend: str, count: int, n: int = 256) -> Check:
    import torch

    g = torch.Generator().manual_seed(20240229)
    a = torch.rand(n, n, generator=g) * 2 - 1
    b = torch.rand(n, n, generator=g) * 2 - 1
    worst = 0.0
    bad = []
    for dev in _devices(backend, count):
        dtypes = [torch.float32] + ([dev.autocast_dtype()] if dev.autocast_dtype() else [])
        for dt in dtypes:
            ad, bd = a.to(dt), b.to(dt)
            ref = ad.double() @ bd.double()
            out = (ad.to(dev.name) @ bd.to(dev.name)).double().cpu()
            err = float((out - ref).abs().max() / ref.abs().max())
            worst = max(worst, err)
            tol = MATMUL_TOL[str(dt).removeprefix("torch.")]
            if err > tol:
                bad.append(f"{dev.name} {str(dt).removeprefix('torch.')} error {err:.3g} > {tol:g}")
    if bad:
        return Check("matmul", "fail", worst, "max rel error", "; ".join(bad))
    return Check("matmul", "pass", worst, "max rel error", f"{n}x{n} matches the CPU reference")


def check_memory(backend: str, count: int, fraction: float, host_cap_bytes: int) -> Check:
    import torch

    chunk = 256 * 2**20
    done = []
    for dev in _devices(backend, count):
        if backend == "cpu":
            import psutil

            target = int(min(psutil.virtual_memory().available * fraction, host_cap_bytes))
        else:
            free, total = dev.mem_get_info()
            target = int(min(total * fraction, free * 0.95))
        held = []
        try:
            left = target
            while left > 0:
                n = min(chunk, left)
                held.append(torch.full((n,), 0x5A, dtype=torch.uint8, device=dev.name))
                left -= n
            # read back a value per chunk: catches memory that allocates but does not hold data
            if any(int(t[-1]) != 0x5A for t in held):
                return Check("memory", "fail", target, "bytes", f"{dev.name}: read-back mismatch")
        except RuntimeError as exc:  # OOM and friends
            got = sum(t.numel() for t in held)
            return Check("memory", "fail", got, "bytes",
                         f"{dev.name}: allocated {got} of {target} bytes: {str(exc)[:200]}")
        finally:
            del held
            dev.synchronize()
            dev.empty_cache()
        done.append(target)
    return Check("memory", "pass", min(done), "bytes",
                 f"allocated and filled {min(done)} bytes on each of {len(done)} device(s)")


def check_collective(backend: str, count: int, timeout_s: float, python: str | None) -> Check:
    world = 2 if backend == "cpu" else count
    if world < 2:
        return Check("collective", "skip", reason="one device: nothing to communicate with")
    with tempfile.TemporaryDirectory(prefix="soak-preflight-") as tmp:
        procs = []
        for rank in range(world):
            env = dict(os.environ, OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen(
                [python or sys.executable, "-m", "soak.preflight", "--collective-worker", backend,
                 str(rank), str(world), f"file://{tmp}/store", str(timeout_s)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                start_new_session=True))
        deadline = time.monotonic() + timeout_s + 60  # + process start and torch import
        outs = []
        timed_out = False
        for p in procs:
            try:
                outs.append(p.communicate(timeout=max(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                timed_out = True
                for q in procs:
                    if q.poll() is None:
                        os.killpg(q.pid, 9)
                outs.append(p.communicate())
    if timed_out:
        return Check("collective", "fail", reason=f"ranks did not finish within {timeout_s:g} s")
    results = []
    for rank, ((out, err), p) in enumerate(zip(outs, procs, strict=True)):
        line = out.strip().splitlines()[-1] if out.strip() else ""
        if p.returncode != 0 or not line.startswith("{"):
            last = err.strip().splitlines()[-1] if err.strip() else f"exit {p.returncode}"
            return Check("collective", "fail", reason=f"rank {rank}: {last[:300]}")
        results.append(json.loads(line))
    wrong = [f"rank {r['rank']}: {', '.join(r['wrong'])}" for r in results if r["wrong"]]
    latency = max(r["all_reduce_s"] for r in results)
    if wrong:
        return Check("collective", "fail", latency, "s", "wrong results: " + "; ".join(wrong))
    return Check("collective", "pass", latency, "s",
                 f"all_reduce and all_gather exact across {world} ranks ({backend})")


def _collective_worker(backend: str, rank: int, world: int, init: str, timeout_s: float) -> int:
    import datetime

    import torch
    import torch.distributed as dist

    from soak.device import Device

    torch.set_num_threads(1)
    dev = Device(backend, rank)
    if backend == "npu":
        import torch_npu  # noqa: F401  (the adapter check probed it first)
    dev.set_current()
    dist.init_process_group(dev.dist_backend, init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    n = 2**18  # 1 MiB of float32
    t = torch.full((n,), float(rank + 1), device=dev.name)
    dev.synchronize()
    t0 = time.perf_counter()
    dist.all_reduce(t)
    dev.synchronize()
    dt = time.perf_counter() - t0
    wrong = []
    if not bool((t == world * (world + 1) / 2).all()):
        wrong.append("all_reduce")
    parts = [torch.empty(n // world, device=dev.name) for _ in range(world)]
    dist.all_gather(parts, torch.full((n // world,), float(rank + 1), device=dev.name))
    if any(not bool((p == r + 1).all()) for r, p in enumerate(parts)):
        wrong.append("all_gather")
    dist.destroy_process_group()
    print(json.dumps({"rank": rank, "wrong": wrong, "all_reduce_s": dt}), flush=True)
    return 0


def check_disk(run_dir: Path, min_free_bytes: int) -> Check:
    probe = run_dir
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent  # the run folder may not exist yet: measure where it will be
    free = shutil.disk_usage(probe).free
    if free < min_free_bytes:
        return Check("disk_free", "fail", free, "bytes",
                     f"{free / GiB:.1f} GiB free at {probe}, need {min_free_bytes / GiB:.1f} GiB")
    return Check("disk_free", "pass", free, "bytes", f"{free / GiB:.1f} GiB free at {probe}")


def check_host_memory(min_available_bytes: int) -> Check:
    import psutil

    avail = int(psutil.virtual_memory().available)
    if avail < min_available_bytes:
        return Check("host_memory", "fail", avail, "bytes",
                     f"{avail / GiB:.1f} GiB available, need {min_available_bytes / GiB:.1f} GiB")
    return Check("host_memory", "pass", avail, "bytes", f"{avail / GiB:.1f} GiB available")


def check_manifest(lock: str | Path | None, npu_smi: str) -> Check:
    if lock is None:
        return Check("manifest_drift", "skip", reason="no --manifest-lock given")
    from soak.manifest import collect_manifest, diff_manifest, load_lock

    drift = diff_manifest(load_lock(lock), collect_manifest(npu_smi=npu_smi))
    if drift:
        shown = "; ".join(f"{d.key}: {d.locked} -> {d.current}" for d in drift[:5])
        more = f" (+{len(drift) - 5} more)" if len(drift) > 5 else ""
        return Check("manifest_drift", "fail", len(drift), "fields", shown + more)
    return Check("manifest_drift", "pass", 0, "fields", f"matches {lock}")


# ------------------------------------------------------------------------------ driver


def run_preflight(
    *,
    backend: str = "auto",
    npu_smi: str | None = None,
    expect_chips: int | None = None,
    run_dir: str | Path = ".",
    manifest_lock: str | Path | None = None,
    mem_fraction: float = 0.5,
    host_alloc_cap_bytes: int = 256 * 2**20,
    collective_timeout_s: float = 60.0,
    min_disk_free_bytes: int = 5 * GiB,
    min_host_memory_bytes: int = 1 * GiB,
    only: Iterable[str] | None = None,
    python: str | None = None,
) -> PreflightResult:
    """Run the checks (all, or ``only`` those named) and return their records."""
    from soak.device import detect_backend, probe_torch_npu, torch_npu_installed

    if backend not in ("auto", "npu", "cuda", "cpu"):
        raise InputError(f"--backend {backend!r}: use auto, npu, cuda or cpu")
    if expect_chips is not None and expect_chips < 1:
        raise InputError(f"--expect-chips {expect_chips}: must be at least 1")
    if expect_chips is not None and only is not None and not {"backend", "npu_smi"} & set(only):
        # Only these two count chips: a PASS would say nothing about the count asked for.
        raise InputError(f"--expect-chips {expect_chips}: needs the backend or npu_smi check "
                         "(add --only backend or --only npu_smi)")
    if not 0 < mem_fraction <= 0.95:
        raise InputError(f"--mem-fraction {mem_fraction}: must be in (0, 0.95]")
    wanted = set(CHECKS if only is None else only)
    if wanted - set(CHECKS):
        raise InputError(f"unknown check(s) {sorted(wanted - set(CHECKS))}: known {list(CHECKS)}")
    checks: list[Check] = []

    def add(name: str, fn: Callable[[], Check]) -> None:
        if name in wanted:
            checks.append(_timed(name, fn))

    # one child-process import of torch_npu serves the adapter check and backend choice
    probe = probe_torch_npu() if torch_npu_installed() else None
    add("adapter", lambda: check_adapter(backend, probe))
    chosen: str | None = None
    count = 0
    try:
        chosen = detect_backend(backend, probe=probe)
        if chosen == "npu":
            import torch_npu  # noqa: F401  (the probe passed: this import is safe)

            count = probe.device_count or 0 if probe else 0
        elif chosen == "cuda":
            import torch

            count = torch.cuda.device_count()
        else:
            count = 1
        if "backend" in wanted:
            checks.append(_backend_check(chosen, count, expect_chips, smi_counts="npu_smi" in wanted))
    except DeviceUnavailable as exc:
        if "backend" in wanted:
            checks.append(Check("backend", "fail", reason=str(exc)))
    smi = npu_smi or "npu-smi"
    # Without an accelerator backend only npu-smi can count the chips asked for (a simulated
    # fleet on a CPU host): then it must be there.
    smi_required = chosen == "npu" or (expect_chips is not None and chosen in (None, "cpu"))
    add("npu_smi", lambda: check_npu_smi(smi, expect_chips, required=smi_required))
    for name, fn in (
        ("matmul", lambda: check_matmul(chosen or "cpu", count)),
        ("memory", lambda: check_memory(chosen or "cpu", count, mem_fraction, host_alloc_cap_bytes)),
        ("collective", lambda: check_collective(chosen or "cpu", count, collective_timeout_s, python)),
    ):
        if chosen is None and name in wanted:
            checks.append(Check(name, "skip", reason="no usable device backend"))
        else:
            add(name, fn)
    add("disk_free", lambda: check_disk(Path(run_dir), min_disk_free_bytes))
    add("host_memory", lambda: check_host_memory(min_host_memory_bytes))
    add("manifest_drift", lambda: check_manifest(manifest_lock, smi))
    return PreflightResult(chosen, tuple(checks))


if __name__ == "__main__" and sys.argv[1:2] == ["--collective-worker"]:
    b, r, w, i, t = sys.argv[2:7]
    sys.exit(_collective_worker(b, int(r), int(w), i, float(t)))
