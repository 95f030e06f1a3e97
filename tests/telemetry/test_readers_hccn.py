"""hccn_tool output: link, net_health, stat, link_stat, speed, bandwidth and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.errors import ToolError
from soak.telemetry import hccn
from soak.telemetry.runner import ReplayRunner

NPU = Path(__file__).resolve().parents[1] / "fixtures" / "npu"


def block(name: str, marker: str) -> str:
    """Lines after the command line containing ``marker``, up to the next blank line."""
    lines = (NPU / name).read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if marker in ln) + 1
    out = []
    for ln in lines[start:]:
        if not ln.strip():
            break
        out.append(ln)
    return "\n".join(out)


def f042_lines() -> list[str]:
    return [
        ln
        for ln in (NPU / "042_hccn_tool_link_health_ip_speed_bandwidth.txt")
        .read_text()
        .splitlines()
        if ln and not ln.startswith("##")
    ]


def test_link_up_and_down():
    lines = f042_lines()
    assert hccn.parse_link(next(ln for ln in lines if ln == "link status: UP")) == hccn.LinkStatus(
        True, "UP"
    )
    assert hccn.parse_link("link status: DOWN") == hccn.LinkStatus(False, "DOWN")


def test_link_after_driver_warning_line():
    text = "call drvMngGetConsoleLogLevel failed , g_conLogLevel = 3\nlink status: UP\n"
    assert hccn.parse_link(text).up is True


def test_net_health_states_from_fixtures():
    states = [ln for ln in f042_lines() if ln.startswith("net health status")]
    assert [hccn.parse_net_health(s).healthy for s in states] == [True, False, False, True]
    before = block("030_910A_detail_queries_and_hccn_tool_before.txt", "-net_health -g")
    assert hccn.parse_net_health(before) == hccn.NetHealth(False, "Socket failed")
    assert hccn.parse_net_health("net health status: Init").healthy is None


def test_stat_counters_of_doc_with_ellipsis():
    text = block("041_hccn_tool_stat_linkstat_doc.txt", "hccn_tool -i 0 -stat -g")
    stats = hccn.parse_stat(text)
    assert stats["mac_tx_pfc_pkt_num"] == 0
    assert stats["roce_qp_status_err_num"] == 0
    assert stats["nic_rx_all_oct_num"] == 482237805
    assert stats["nic_tx_all_pkg_num"] == 122404
    assert len(stats) == 8


def test_stat_byte_exact_910a():
    stats = hccn.parse_stat(
        block("031_910A_health_Alarm_multiline_and_errors_after.txt", "-stat -g")
    )
    assert dict(stats) == {"roce_rx_err_pkt_num": 0, "roce_tx_err_pkt_num": 0}


def test_link_stat_devid_prefix_after_fault_shows_new_down():
    before = hccn.parse_link_stat(
        block("030_910A_detail_queries_and_hccn_tool_before.txt", "-link_stat -g")
    )
    after = hccn.parse_link_stat(
        block("031_910A_health_Alarm_multiline_and_errors_after.txt", "-link_stat -g")
    )
    assert before.current_time == "Wed Aug  2 03:09:26 2022"
    assert before.link_up_count == 2 and before.link_down_count == 1
    assert after.records[0] == ("Tue Aug  1 14:44:40 2022", "DOWN")
    assert after.link_down_count == 2 and len(after.records) == 4


def test_link_stat_device_prefix_doc_variant():
    stat = hccn.parse_link_stat(
        block("041_hccn_tool_stat_linkstat_doc.txt", "hccn_tool -i 0 -link_stat -g")
    )
    assert stat.records == (
        ("Tue Jun  6 16:32:12 2023", "UP"),
        ("Tue Jun  6 16:32:10 2023", "DOWN"),
        ("Tue Jun  6 16:31:55 2023", "UP"),
    )


def test_speed_and_bandwidth():
    lines = f042_lines()
    assert hccn.parse_speed(next(ln for ln in lines if ln.startswith("Speed"))) == 100000
    bw = "\n".join(ln for ln in lines if ln.startswith("Bandwidth"))
    assert hccn.parse_bandwidth(bw) == (0.0, 0.0)
    assert hccn.parse_speed("Speed: Unknown!") is None


@pytest.mark.parametrize(
    "text",
    [
        "call drvMngGetConsoleLogLevel failed , g_conLogLevel = 3\nDevice ID is out of the valid range.\nCmd execute failed!",
        "call drvMngGetConsoleLogLevel failed , g_conLogLevel = 3\nCommand execute failed!",
    ],
)
def test_errors_of_fixture_040_raise_tool_error(text):
    for parse in (hccn.parse_link, hccn.parse_stat, hccn.parse_link_stat, hccn.parse_net_health):
        with pytest.raises(ToolError) as info:
            parse(text)
        assert info.value.kind == "error_text"


def test_every_error_pair_in_fixture_040_is_recognised():
    text = (NPU / "040_hccn_tool_errors_310_host.txt").read_text()
    results = [ln for ln in text.splitlines() if not ln.startswith(("[root", "call drv"))]
    assert results  # Device ID..., Cmd execute..., Command execute...
    for line in results:
        with pytest.raises(ToolError):
            hccn.parse_link(line)


def test_garbage_is_a_tool_error():
    with pytest.raises(ToolError) as info:
        hccn.parse_link("hello")
    assert info.value.kind == "garbage"


def test_reader_command_lines_and_read_link_fields():
    runner = ReplayRunner(
        {
            "-i 3 -link -g": "link status: DOWN\n",
            "-i 3 -net_health -g": "net health status: Success\n",
            "-i 3 -stat -g": "packet statistics:\nroce_rx_err_pkt_num:7\n",
            "-i 3 -link_stat -g": block(
                "041_hccn_tool_stat_linkstat_doc.txt", "hccn_tool -i 0 -link_stat -g"
            ),
            "-i 3 -speed -g": "Speed: 200000 Mb/s\n",
            "-i 3 -bandwidth -g": "Bandwidth TX: 1.50 MB/sec\nBandwidth RX: 2.25 MB/sec\n",
            "-i 9 -link -g": "Device ID is out of the valid range.\nCmd execute failed!\n",
        }
    )
    r = hccn.HccnReader("/usr/local/Ascend/driver/tools/hccn_tool", runner)
    assert r.link(3).up is False
    assert r.net_health(3).healthy is True
    assert r.stat(3)["roce_rx_err_pkt_num"] == 7
    assert r.link_stat(3).link_up_count == 2
    assert r.speed(3) == 200000
    assert r.bandwidth(3) == (1.5, 2.25)
    assert runner.calls[0] == ("/usr/local/Ascend/driver/tools/hccn_tool", "-i", "3", "-link", "-g")
    assert hccn.read_link_fields("hccn_tool", runner, 3) == {"link_up": False, "link_up_count": 2}
    with pytest.raises(ToolError):
        hccn.read_link_fields("hccn_tool", runner, 9)


def test_link_fields_without_link_stat_keep_the_state():
    # an older driver refuses -link_stat: the port's state is still read, its count left out
    runner = ReplayRunner({"-i 0 -link -g": "link status: UP\n", "-i 0 -link_stat -g": "Cmd execute failed!\n"})
    assert hccn.read_link_fields("hccn_tool", runner, 0) == {"link_up": True}
