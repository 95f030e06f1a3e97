"""/metrics over HTTP: served from the cached snapshot, also while npu-smi hangs."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from exporter_helpers import free_port, http_get, scrape_when, soak_exporter_argv, wait_for

from exporters.collector import SoakCollector, make_registry
from exporters.server import serve
from soak.telemetry.backends import NpuBackend
from soak.telemetry.runner import Runner
from soak.telemetry.sampler import Sampler
from soak.telemetry.sim import CONFIG_NAME, SimConfig, install


def _lines(text: str, name: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith(name + "{") or ln.startswith(name + " ")]


def test_scrape_over_http_on_an_ephemeral_port(tmp_path: Path) -> None:
    script = install(tmp_path / "fleet", SimConfig.build(chips=3, fixed_elapsed_s=3600.0))
    backend = NpuBackend(npu_smi=str(script), detail_interval_s=None, timeout_s=20)
    sampler = Sampler(backend, interval_s=5.0)
    sampler.tick()
    server = serve(make_registry(SoakCollector.for_sampler(sampler)), "127.0.0.1:0")
    try:
        assert server.port != 0
        text = http_get(server.url)
    finally:
        server.stop()
    assert len(_lines(text, "soak_device_up")) == 3
    assert all(ln.endswith(" 1.0") for ln in _lines(text, "soak_device_up"))
    hbm_total = [ln for ln in _lines(text, "soak_device_memory_total_bytes") if 'kind="hbm"' in ln]
    assert len(hbm_total) == 3 and all(ln.endswith(" 6.8719476736e+10") for ln in hbm_total)


def test_hanging_npu_smi_never_blocks_a_scrape_and_is_reported(tmp_path: Path) -> None:
    script = install(tmp_path / "fleet", SimConfig.build(chips=2))
    cfg = tmp_path / "fleet" / CONFIG_NAME
    backend = NpuBackend(npu_smi=str(script), detail_interval_s=None, runner=Runner(timeout_s=30.0))
    sampler = Sampler(backend, interval_s=0.2)
    # a good reading first (generous timeout: a loaded machine starts Python slowly)
    assert [d.up for d in sampler.tick().devices] == [True, True]
    backend.runner = backend.reader.runner = Runner(timeout_s=1.0)
    SimConfig.load(cfg).with_faults("hang:seconds=120").save(cfg)  # npu-smi now hangs for 2 minutes
    server = serve(make_registry(SoakCollector.for_sampler(sampler, stale_after_s=30)), "127.0.0.1:0")
    sampler.start()
    try:
        # every scrape comes back (5 s client timeout) although each npu-smi call hangs
        def reported() -> bool:
            text = http_get(server.url, timeout_s=5.0)
            up = _lines(text, "soak_device_up")
            errors = _lines(text, "soak_reader_errors_total")
            return (len(up) == 2 and all(ln.endswith(" 0.0") for ln in up)
                    and any('reader="npu-smi"' in ln and not ln.endswith(" 0.0") for ln in errors))

        wait_for(reported, 60, "soak_device_up 0 and npu-smi errors counted")  # bound, not a speed target
        text = http_get(server.url, timeout_s=5.0)
        assert "soak_device_utilization_ratio" not in text  # gaps carry no values
    finally:
        server.stop()
        sampler.stop(timeout_s=10)


def test_soak_exporter_command_serves_sim_and_exits_cleanly_on_sigterm(spawn) -> None:
    port = free_port()
    proc = spawn(soak_exporter_argv(port, "--backend", "sim", "--sim-chips", "2", "--interval", "0.5",
                                    "--detail-interval", "0", "--compat", "npu-exporter"))
    url = f"http://127.0.0.1:{port}/metrics"
    # /metrics answers before the first reading; wait for that reading
    text = scrape_when(url, "soak_device_up{", 30)
    assert len(_lines(text, "soak_device_up")) == 2
    assert len(_lines(text, "npu_chip_info_utilization")) == 2
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "serving http://127.0.0.1:" in err and "stopped after" in err
    assert out == ""  # progress goes to stderr only


def test_bad_listen_address_is_one_line_and_exit_2(spawn) -> None:
    proc = spawn([sys.executable, "-m", "soak", "exporter", "--backend", "cpu", "--listen", "localhost"])
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err.strip() == "soak: error: --listen must be HOST:PORT like 127.0.0.1:19400, got 'localhost'"
