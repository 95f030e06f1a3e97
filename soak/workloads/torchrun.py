"""torchrun whose TCP stores listen on one address, never on every interface.

torch's ``TCPStore`` server binds the wildcard address whatever host it is given (torch 2.13:
``TCPStore("127.0.0.1", 0, is_master=True)`` listens on ``*:PORT``), and torchrun's c10d
rendezvous starts two of them in the agent: the rendezvous store and the store it shares with
the ranks (``MASTER_ADDR:MASTER_PORT``). The rendezvous state in them is a pickle that the
agent loads, so whoever reaches either port runs code as the agent; ``--standalone`` is no
exception. torchrun has no option to choose the listen address, but ``TCPStore`` takes a socket
that already listens (``master_listen_fd``).

``python -m soak.workloads.torchrun ARGS`` is ``python -m torch.distributed.run ARGS`` with one
more rendezvous backend, ``soak-c10d``: torch's c10d rendezvous (same options, same
``--rdzv-conf`` keys; ``is_host`` required) whose rendezvous store listens on the host of
``--rdzv-endpoint`` and whose shared store listens on ``--local-addr``. A single-node run gives
``127.0.0.1`` for both; a cluster run the addresses the nodes reach each other at.

On one host, loopback is no boundary: every local user reaches ``127.0.0.1`` (the ports are in
``/proc/net/tcp``, the single-node rendezvous id is a constant). So a single-node run also gives
``--private-network`` (read here, never passed to torch): before torch is imported the agent
moves into a network namespace of its own whose only interface is its own loopback, and its
ranks inherit it. Root (an Ascend node's agent) needs only ``unshare(CLONE_NEWNET)``; another
user first enters a user namespace of its own that maps its uid and gid to themselves. Files,
devices and the run folder are the same inside; no other process of the host can reach a port
there. Where the kernel refuses (a container without the capability, user namespaces turned
off) the run goes on as before and one line on stderr says that its stores are reachable by
every local user of the host's network namespace.

A cluster run's stores are on the network, where no namespace hides them. There, and on one
node too, every rendezvous state read from the store is checked before torch unpickles it
(``check_state``: torch's rendezvous types only): reaching a store lets one disturb the job,
not run code as the agent.
"""

from __future__ import annotations

import ctypes
import fcntl
import io
import ipaddress
import os
import pickle
import socket
import struct
import sys
from datetime import timedelta
from typing import Any

BACKEND = "soak-c10d"
PRIVATE_NETWORK = "--private-network"

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
# inside the namespace there is nothing but loopback: the collective libraries' bootstrap
# sockets are told so (a NIC named by the host's settings does not exist there)
PRIVATE_ENV = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo", "HCCL_SOCKET_IFNAME": "lo"}
PRIVATE_ENV_DROPPED = ("HCCL_IF_IP",)


def _unshare(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, _SIOCGIFFLAGS, ifreq)[:18])[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def private_network() -> str | None:
    """Move this process, and all it starts from now on, into a network namespace of its own
    with its loopback up; None when done, else why not (nothing changed then). Call it while
    the process has one thread (a user namespace needs that)."""
    uid, gid = os.geteuid(), os.getegid()
    try:
        if uid != 0:
            _unshare(_CLONE_NEWUSER)
            # uid and gid stay what they are: files and devices see the same user
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w") as fh:
                    fh.write(text)
        _unshare(_CLONE_NEWNET)
        _loopback_up()
    except OSError as exc:
        return exc.strerror or str(exc)
    for key in PRIVATE_ENV_DROPPED:
        os.environ.pop(key, None)
    os.environ.update(PRIVATE_ENV)
    return None


def _family(host: str) -> socket.AddressFamily:
    try:
        return socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        return socket.AF_UNSPEC  # a name: as it resolves


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host`` (an address, or a name: its first address) and
    ``port`` (0: a free one). ``OSError`` when the address is not this host's."""
    family = _family(host)
    found = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    fam, _, _, _, addr = found[0]
    if family == socket.AF_UNSPEC and host != "localhost" and ipaddress.ip_address(addr[0]).is_loopback:
        # Debian's /etc/hosts maps a host's own name to 127.0.1.1: the others would dial its
        # real address and find nothing listening there
        raise OSError(f"{host} resolves to {addr[0]} on this host, where the other nodes cannot reach it: "
                      "give the rendezvous (or cluster.advertise) as an address")
    return socket.create_server(addr, family=fam, backlog=socket.SOMAXCONN)


def bound_store(host: str, port: int, *, timeout: timedelta, multi_tenant: bool = True) -> Any:
    """A ``TCPStore`` server listening on ``host`` only (see the module's docstring)."""
    from torch.distributed import TCPStore

    sock = listening_socket(host, port)
    bound = int(sock.getsockname()[1])
    # the store owns the descriptor from here (it closes it); detached, Python's socket
    # object cannot close it under the store when it is collected
    fd = sock.detach()
    return TCPStore(host, bound, is_master=True, multi_tenant=multi_tenant, timeout=timeout,
                    master_listen_fd=fd)


# What torch's rendezvous state is made of (torch 2.13's pickle of ``_RendezvousState``: the
# state, its nodes, their heartbeats' datetimes). Nothing else may be named in what the store
# holds: a pickle naming ``os.system`` is code that whoever reaches the store wrote.
_RDZV = "torch.distributed.elastic.rendezvous.dynamic_rendezvous"
STATE_TYPES = frozenset({(_RDZV, "_RendezvousState"), (_RDZV, "_NodeDesc"), ("datetime", "datetime"),
                         ("datetime", "timezone"), ("datetime", "timedelta")})


class _StateUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in STATE_TYPES:
            raise pickle.UnpicklingError(f"{module}.{name}")
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("a persistent id")


def check_state(bits: bytes) -> None:
    """Raise ``pickle.UnpicklingError`` (naming it) unless ``bits`` is a pickle of rendezvous
    types only; torch then loads the very bytes checked."""
    _StateUnpickler(io.BytesIO(bits)).load()


def _checked_backend(store: Any, run_id: str) -> Any:
    """torch's c10d rendezvous backend whose every state read from the store is checked first
    (``check_state``): a state naming anything else is refused, so reaching the store lets one
    disturb the rendezvous, not run code as the agent."""
    from torch.distributed.elastic.rendezvous.api import RendezvousStateError
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend

    class CheckedBackend(C10dRendezvousBackend):
        def _decode_state(self, base64_state: bytes) -> Any:
            pair = super()._decode_state(base64_state)
            if pair is not None:
                try:
                    check_state(pair[0])
                except Exception as exc:
                    raise RendezvousStateError(
                        f"soak: refused the rendezvous state in the store ({exc}): it is no rendezvous "
                        "state, and loading it could run code; whoever reaches the store wrote it") from None
            return pair

    return CheckedBackend(store, run_id)


def create_handler(params: Any) -> Any:
    """The ``soak-c10d`` rendezvous handler (``RendezvousParameters`` in)."""
    from torch.distributed import TCPStore
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
        create_handler as c10d_handler,
    )
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

    host, port = parse_rendezvous_endpoint(params.endpoint, default_port=29400)
    is_host = params.get_as_bool("is_host")
    if is_host is None:
        raise ValueError(f"rendezvous backend {BACKEND} needs is_host in --rdzv-conf (torch's guess from the "
                         "host name may bind where the other nodes cannot reach)")
    timeout = timedelta(seconds=int(params.get_as_int("read_timeout", 60) or 60))
    if is_host:
        store = bound_store(host, port, timeout=timeout)
    else:
        store = TCPStore(host, port, is_master=False, multi_tenant=True, timeout=timeout)
    handler = c10d_handler(store, _checked_backend(store, params.run_id), params)
    if not hasattr(handler, "_create_tcp_store_server"):
        # the shared store would listen on every interface again: refuse to start instead
        raise RuntimeError(f"this torch's rendezvous handler has no _create_tcp_store_server: {BACKEND} "
                           "cannot bind the store it shares with the ranks")

    def shared_store(master_addr: str, master_port: int) -> Any:
        return bound_store(master_addr, master_port, timeout=timedelta(seconds=300))

    handler._create_tcp_store_server = shared_store
    # torchrun checks that the handler names the backend asked for
    handler.get_backend = lambda: BACKEND
    return handler


def register() -> None:
    from torch.distributed.elastic.rendezvous import rendezvous_handler_registry

    rendezvous_handler_registry.register(BACKEND, create_handler)


def main(argv: list[str] | None = None) -> None:
    argv = list(argv if argv is not None else sys.argv[1:])
    if PRIVATE_NETWORK in argv:
        argv.remove(PRIVATE_NETWORK)
        why = private_network()
        if why is not None:
            print(f"soak: the rendezvous runs without a private network ({why}): its stores on 127.0.0.1 "
                  "are reachable by every local user of this host, who could run code as this agent",
                  file=sys.stderr, flush=True)
    register()
    from torch.distributed.run import main as torchrun

    torchrun(argv)


if __name__ == "__main__":
    main()
