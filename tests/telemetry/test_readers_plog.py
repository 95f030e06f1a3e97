"""HCCL plog following: line kinds from recorded plog lines, tail -F behaviour on a folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from soak.telemetry.plog import KINDS, PlogFollower, classify_line, count_text

NPU = Path(__file__).resolve().parents[1] / "fixtures" / "npu"
PLOG = (NPU / "050_plog_hccl_timeout_examples.log").read_text()

SOCKET = "[ERROR] HCCL(114725,python3):2025-06-19-09:09:19.687.450 [hccl_socket_manager.cc:778] [117514][Wait][LinkEstablish]wait socket establish timeout, role[0] rank[2] timeout[130]\n"
P2P = "[ERROR] HCCL(42,python):2025-02-20-16:29:43.541.398 [p2p_mgmt.cc:297][42][Wait][P2PConnected]connected p2p timeout, timeout:130 s. local logicDevid:0, remote physic id:2.\n"
INFO = "[INFO] HCCL(114725,python3):2025-06-19-09:27:24.674.788 [externalinput.cc:407] [114725]HCCL_CONNECT_TIMEOUT set by environment to [130]s\n"


def zero(**counts: int) -> dict[str, int]:
    out = dict.fromkeys(KINDS, 0)
    out.update(counts)
    return out


def test_counts_of_recorded_plog_lines():
    assert count_text(PLOG) == zero(
        socket_timeout=3, p2p_timeout=4, exec_timeout=1, heartbeat_cqe_error=1, link_error=6
    )


def test_counts_of_torch_npu_and_acl_texts():
    text = (NPU / "051_torch_npu_hccl_timeout_exceptions.txt").read_text()
    lines = "\n".join(ln for ln in text.splitlines() if not ln.startswith("##"))
    assert count_text(lines) == zero(
        socket_timeout=2,
        p2p_timeout=1,
        notify_timeout=1,
        exec_timeout=2,
        heartbeat_cqe_error=1,
        watchdog_timeout=1,
    )


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (SOCKET, "socket_timeout"),
        (P2P, "p2p_timeout"),
        (
            "[ERROR] HCCL(10972,python3):2023-01-31-03:00:11.356.298 [exchanger_network.cc:237][10972][21499][Wait][AllClientSocketEstab]errNo[0x000000000500000b] client : device[2] rank[2] get socket timeout, total[3] remain[3]",
            "socket_timeout",
        ),
        (
            "EI0006: Getting socket times out. Reason: 1. The remote does not initiate a connect request.",
            "socket_timeout",
        ),
        (
            "EI0002: [PID: 7277] 2024-11-28-11:59:30.645.648 The wait execution of the Notify register times out. Reason: ...",
            "notify_timeout",
        ),
        ("[Error]: The execution of the internal task times out. ", "exec_timeout"),
        (
            "[ERROR] HCCL(12337,python):2023-07-04-22:15:59.773.698 [heartbeat.cc:551][12337][283707][Heartbeat]cqe err status[12], time:[2023-07-04 22:15:59.099518], ip:[192.1.95.102]",
            "heartbeat_cqe_error",
        ),
        (
            "[ERROR] HCCL(59420,python3):2025-01-24-11:24:07.908.424 [comm_base.cc:967][107626]   _________________________LINK_ERROR_INFO___________________________",
            "link_error",
        ),
        (
            "[Rank 3] Watchdog caught collective operation timeout: WorkHCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800411 milliseconds before timing out.",
            "watchdog_timeout",
        ),
        (INFO, None),
        (
            "[INFO] ATRACE(1365,python3.8):2025-08-05-19:45:45.929.864 [trace_attr.c:189](tid:1365) attr init success, timeout=0ms.",
            None,
        ),
        (
            "[TRACE] HCCL(12337,python):2023-07-04-21:46:57.092.002 [status:init] [hcom.cc:194] hcom init by file success,take time [248118]us",
            None,
        ),
        (
            "[ERROR] HCCL(59420,python3):2025-01-24-11:24:07.908.596 [comm_base.cc:984][107626]the connection failure between this device and target device may be due to the following reasons:",
            None,
        ),
    ],
)
def test_classify_line(line, kind):
    assert classify_line(line) == kind


def plog_dir(tmp_path: Path) -> Path:
    d = tmp_path / "plog"
    (d / "debug" / "plog").mkdir(parents=True)
    (d / "run" / "plog").mkdir(parents=True)
    return d


def test_existing_content_is_skipped_and_appends_are_counted(tmp_path):
    d = plog_dir(tmp_path)
    f = d / "debug" / "plog" / "plog-100_20250619092939806.log"
    f.write_text(SOCKET * 5)
    follower = PlogFollower(d)
    assert follower.poll() == zero()
    with f.open("a") as fh:
        fh.write(INFO + P2P + SOCKET)
    assert follower.poll() == zero(socket_timeout=1, p2p_timeout=1)
    assert follower.poll() == zero(socket_timeout=1, p2p_timeout=1)  # nothing new


def test_from_start_counts_existing_files(tmp_path):
    d = plog_dir(tmp_path)
    (d / "debug" / "plog" / "plog-1_1.log").write_text(PLOG)
    assert PlogFollower(d, from_start=True).poll() == count_text(PLOG)


def test_partial_last_line_waits_for_its_newline(tmp_path):
    d = plog_dir(tmp_path)
    follower = PlogFollower(d)
    f = d / "run" / "plog" / "plog-7_1.log"
    f.write_text(SOCKET[:40])
    assert follower.poll() == zero()
    with f.open("a") as fh:
        fh.write(SOCKET[40:])
    assert follower.poll() == zero(socket_timeout=1)


def test_new_file_per_process_is_picked_up_from_its_first_line(tmp_path):
    d = plog_dir(tmp_path)
    follower = PlogFollower(d)
    (d / "debug" / "plog" / "plog-200_1.log").write_text(P2P)
    assert follower.poll() == zero(p2p_timeout=1)
    (d / "debug" / "plog" / "plog-201_2.log").write_text(P2P + P2P)
    assert follower.poll() == zero(p2p_timeout=3)


def test_rotation_rename_and_new_file_loses_nothing(tmp_path):
    d = plog_dir(tmp_path)
    follower = PlogFollower(d)
    f = d / "debug" / "plog" / "plog-300_1.log"
    f.write_text(SOCKET)
    assert follower.poll() == zero(socket_timeout=1)
    # the writer appends one more line, then rotates: rename, and a new file under the old name
    with f.open("a") as fh:
        fh.write(P2P)
    os.rename(f, d / "debug" / "plog" / "plog-300_1.log.1")
    f.write_text(SOCKET + SOCKET)
    assert follower.poll() == zero(socket_timeout=3, p2p_timeout=1)
    with (d / "debug" / "plog" / "plog-300_1.log.1").open("a") as fh:
        fh.write(P2P)  # a late write into the rotated file is still seen
    assert follower.poll() == zero(socket_timeout=3, p2p_timeout=2)


def test_truncation_starts_the_file_over(tmp_path):
    d = plog_dir(tmp_path)
    follower = PlogFollower(d)
    f = d / "run" / "plog" / "plog-400_1.log"
    f.write_text(INFO * 20 + SOCKET)
    assert follower.poll() == zero(socket_timeout=1)
    f.write_text(P2P)  # copytruncate: same inode, shorter content
    assert follower.poll() == zero(socket_timeout=1, p2p_timeout=1)


def test_deleted_files_are_forgotten(tmp_path):
    d = plog_dir(tmp_path)
    follower = PlogFollower(d)
    f = d / "run" / "plog" / "plog-500_1.log"
    f.write_text(SOCKET)
    follower.poll()
    f.unlink()
    assert follower.poll() == zero(socket_timeout=1)
    assert follower._offsets == {}


def test_folder_created_after_the_follower(tmp_path):
    d = tmp_path / "later"
    follower = PlogFollower(d)
    assert follower.poll() == zero()
    d.mkdir()
    (d / "plog-1_1.log").write_text(SOCKET)
    assert follower.poll() == zero(socket_timeout=1)


def test_a_large_file_is_not_read_again_on_each_poll(tmp_path):
    d = plog_dir(tmp_path)
    f = d / "debug" / "plog" / "plog-600_1.log"
    f.write_text(INFO * 30000)  # ~4 MB of chatter before following starts
    follower = PlogFollower(d)
    follower.poll()
    assert follower.bytes_read == 0
    with f.open("a") as fh:
        fh.write(SOCKET)
    follower.poll()
    follower.poll()
    assert follower.bytes_read == len(SOCKET.encode())
    assert follower.counts() == zero(socket_timeout=1)


def test_non_log_files_are_ignored(tmp_path):
    d = plog_dir(tmp_path)
    follower = PlogFollower(d)
    (d / "notes.txt").write_text(SOCKET)
    assert follower.poll() == zero()


@pytest.mark.parametrize(
    ("line", "kind"),
    [(ln, k) for ln, k in test_classify_line.pytestmark[0].args[1] if k is not None],
)
def test_block_counting_finds_every_kind_classify_line_knows(line, kind):
    # count_text/poll only look at lines holding an anchor literal: every kind must have one
    text = INFO + line.rstrip("\n") + "\n" + INFO
    assert count_text(text) == zero(**{kind: 1})


def test_binary_junk_and_a_100_mb_line_are_read_in_bounded_memory(tmp_path):
    import tracemalloc

    d = plog_dir(tmp_path)
    f = d / "debug" / "plog" / "plog-700_1.log"
    follower = PlogFollower(d)
    with f.open("wb") as fh:
        fh.write(bytes(range(256)) * 4096 + b"\n")  # 1 MiB of binary junk with NULs
        block = b"x" * (1 << 20)
        for _ in range(100):  # one 100 MB line without a newline
            fh.write(block)
        fh.write(b"\n" + SOCKET.encode())
    tracemalloc.start()
    try:
        for _ in range(30):  # a bounded amount a poll: the file takes several
            counts = follower.poll()
            if follower.bytes_read == f.stat().st_size:
                break
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert counts == zero(socket_timeout=1)  # the line after the junk is still counted
    assert follower.bytes_read == f.stat().st_size
    assert peak < 32 * 1024 * 1024  # a few 1 MiB chunks, never the 100 MB line


def test_a_huge_new_file_is_read_a_bounded_amount_per_poll(tmp_path):
    import time

    from soak.telemetry import plog

    d = plog_dir(tmp_path)
    follower = PlogFollower(d)
    f = d / "debug" / "plog" / "plog-800_1.log"
    with f.open("wb") as fh:  # 1 GiB, sparse: the poll, inside a sampling tick, must not read it all
        fh.truncate(1 << 30)
        fh.seek(0, os.SEEK_END)
        fh.write(b"\n" + SOCKET.encode())
    small = d / "debug" / "plog" / "plog-801_1.log"
    small.write_text(SOCKET)
    started = time.monotonic()
    follower.poll()
    assert time.monotonic() - started < 5
    assert follower.bytes_read <= plog.MAX_POLL_BYTES
    assert follower.counts()["socket_timeout"] == 1  # the small file is still read in the same poll


def test_a_symlink_fifo_or_device_named_log_is_never_read(tmp_path):
    d = plog_dir(tmp_path)
    follower = PlogFollower(d)
    outside = tmp_path / "secret.txt"
    outside.write_text(SOCKET * 3)
    folder = d / "debug" / "plog"
    (folder / "plog-900_1.log").symlink_to(outside)  # another user's file, /proc/kcore
    (folder / "plog-901_1.log").symlink_to("/dev/zero")
    os.mkfifo(folder / "plog-902_1.log")  # a writer that never writes
    assert follower.poll() == zero()
    assert follower.bytes_read == 0
