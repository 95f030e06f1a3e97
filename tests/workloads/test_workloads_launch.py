"""The torchrun command the daemon and `soak workload` run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from soak.errors import InputError
from soak.workloads.launch import Rendezvous, build_command

LOCAL = ["--private-network", "--nnodes=1", "--rdzv-backend=soak-c10d", "--rdzv-endpoint=127.0.0.1:0",
         "--rdzv-id=local", "--rdzv-conf=is_host=1", "--local-addr=127.0.0.1"]


def test_build_command_is_a_loopback_rendezvous_without_restarts(tmp_path):
    # torchrun --standalone listened on every interface
    argv = build_command("collective", tmp_path / "r", 4, "small", duration_s=90.5,
                         inject=("comm-delay:1,3",), extra=("--ckpt-every", "7"), python="py")
    assert argv == ["py", "-m", "soak.workloads.torchrun", *LOCAL, "--nproc-per-node=4",
                    "--max-restarts=0", "-m", "soak.workloads.collective",
                    "--run-dir", str(tmp_path / "r"), "--size", "small", "--duration-s", "90.5",
                    "--inject", "comm-delay:1,3", "--ckpt-every", "7"]


@pytest.mark.parametrize("endpoint, addr", [("10.213.7.1:29400", "10.213.7.1"), ("[fd00::1]:29400", "fd00::1"),
                                            ("soak-cluster-0.soak-cluster:29400", "soak-cluster-0.soak-cluster")])
def test_cluster_host_node_gives_its_workers_the_rendezvous_host_not_its_hostname(tmp_path, endpoint, addr):
    # getfqdn() of a node can be "localhost": the other nodes' workers then dialled themselves
    def argv(is_host: bool, local_addr: str | None = None) -> list[str]:
        return build_command("lm", tmp_path, 1, rendezvous=Rendezvous(
            nnodes=2, endpoint=endpoint, rdzv_id="c1-g0", is_host=is_host, join_timeout_s=120,
            local_addr=local_addr))

    host = argv(True, "10.9.9.9")
    assert host[3:9] == ["--nnodes=2", "--rdzv-backend=soak-c10d", f"--rdzv-endpoint={endpoint}", "--rdzv-id=c1-g0",
                         "--rdzv-conf=join_timeout=120,is_host=1", f"--local-addr={addr}"]
    assert not [a for a in argv(False) if a.startswith("--local-addr")]
    # another node's shared store (when it is the job's agent rank 0) listens where it is reached
    assert [a for a in argv(False, "10.213.7.2") if a.startswith("--local-addr")] == ["--local-addr=10.213.7.2"]


@pytest.mark.parametrize("kw, words", [
    ({"workload": "bert"}, "workload 'bert'"),
    ({"nproc": 0}, "nproc 0"),
    ({"inject": ("corrupt:3",), "workload": "collective"}, "gemm and lm workloads only"),
    ({"inject": ("bitflip:3,1",), "workload": "gemm"}, "lm workload only"),
])
def test_build_command_rejects_bad_input(tmp_path, kw, words):
    args = {"workload": "lm", "run_dir": tmp_path, "nproc": 2, **kw}
    with pytest.raises(InputError, match=words):
        build_command(**args)


def test_soak_workload_print_and_bad_spec(tmp_path):
    cli = [sys.executable, "-m", "soak", "workload"]
    res = subprocess.run([*cli, "gemm", "--print", "--nproc-per-node", "3", "--run-dir",
                          str(tmp_path), "--size", "small", "--steps", "5", "--sdc-every", "2"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0
    argv = res.stdout.split()
    assert argv[1:12] == ["-m", "soak.workloads.torchrun", *LOCAL, "--nproc-per-node=3", "--max-restarts=0"]
    assert argv[12:] == ["-m", "soak.workloads.gemm", "--run-dir", str(tmp_path), "--size",
                        "small", "--steps", "5", "--sdc-every", "2"]
    bad = subprocess.run([*cli, "lm", "--run-dir", str(tmp_path), "--inject", "hang:soon"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr == ("soak: error: --inject 'hang:soon': AT (a step) must be an integer "
                          ">= 1, got 'soon'\n")
