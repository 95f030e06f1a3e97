"""The TCP listeners of a process tree, read from /proc (what ``ss -ltnp`` shows).

A listener on a wildcard address (``0.0.0.0``, ``::``) is reachable from every network the
host is on; a test of a run looks for those among the run's own processes.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

LISTEN = "0A"  # st of a listening socket in /proc/net/tcp
WILDCARDS = (ipaddress.ip_address("0.0.0.0"), ipaddress.ip_address("::"))


@dataclass(frozen=True)
class Listener:
    pid: int
    cmdline: str
    address: str
    port: int
    netns: str = ""  # the network namespace it listens in (``net:[INODE]``)

    @property
    def wildcard(self) -> bool:
        return ipaddress.ip_address(self.address) in WILDCARDS


def _address(hex_addr: str) -> tuple[str, int]:
    host, port = hex_addr.split(":")
    raw = bytes.fromhex(host)
    # /proc prints each 32-bit word in host (little-endian) byte order
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words)), int(port, 16)


def _listening_inodes(proc: Path = Path("/proc"), pid: int | str = "self") -> dict[int, tuple[str, int]]:
    """The listening sockets of ``pid``'s network namespace (a process in a namespace of its
    own listens where ``/proc/net`` of this one does not show)."""
    found: dict[int, tuple[str, int]] = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc / str(pid) / "net" / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == LISTEN:
                found[int(f[9])] = _address(f[1])
    return found


def process_tree(root: int, proc: Path = Path("/proc")) -> set[int]:
    """``root`` and every process descended from it."""
    parents: dict[int, int] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return tree


def cmdline(pid: int, proc: Path = Path("/proc")) -> str:
    try:
        return (proc / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def listeners(root: int, proc: Path = Path("/proc")) -> list[Listener]:
    """The listening TCP sockets held by ``root``'s process tree, in whichever network
    namespace each process is."""
    by_netns: dict[str, dict[int, tuple[str, int]]] = {}
    out: list[Listener] = []
    for pid in sorted(process_tree(root, proc)):
        try:
            netns = os.readlink(proc / str(pid) / "ns" / "net")
            if netns not in by_netns:
                by_netns[netns] = _listening_inodes(proc, pid)
            inodes = by_netns[netns]
            fds = list((proc / str(pid) / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = int(target[8:-1])
                if inode in inodes:
                    out.append(Listener(pid, cmdline(pid, proc), *inodes[inode], netns=netns))
    return out
