"""The hostfile of ``soak cluster launch``: which nodes run an agent, in rank order.

One host per line, ``[user@]host[:port] [name=NODE_NAME]``; ``#`` starts a comment; blank
lines are skipped. The node rank is the host's position among the hosts (0 for the first
line that names one). An IPv6 address with a port is written in brackets, ``[fe80::1]:2222``,
as OpenSSH's own ``ssh://`` form does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from soak.errors import InputError

# A node name ends up in a Prometheus label, a log prefix and the store: keep it plain.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
NODE_NAME_RULE = "letters, digits, '.', '_' or '-', starting with a letter or digit (at most 63)"


def valid_node_name(name: str) -> bool:
    """A node's name as every way of giving one is checked (host file, ``--node-name``,
    ``cluster.node_name``, ``NODE_NAME``): it names rows, metrics labels, files and the app's
    and the report's text, so it is a plain name, never markup or a path."""
    return bool(_NAME.fullmatch(name))
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,31}")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}")
_ADDRESS = re.compile(r"(?:(?P<user>[^@\s]+)@)?(?:\[(?P<v6>[0-9A-Fa-f:.]+(?:%[\w.-]+)?)\]|(?P<host>[^:\s\[\]]+))"
                      r"(?::(?P<port>[^:\s]*))?")


@dataclass(frozen=True)
class Host:
    """One node of the cluster as ssh reaches it."""

    host: str
    name: str  # --node-name of its agent; the host when the line gives none
    rank: int
    user: str | None = None
    port: int | None = None  # None: ssh's own default (22 or the ssh_config's Port)
    line: int = 0  # line number in the hostfile, for messages

    @property
    def destination(self) -> str:
        """The ``[user@]host`` argument of ssh and scp (ports go in ``-p``/``-P``)."""
        return f"{self.user}@{self.host}" if self.user else self.host


def parse_hostfile(text: str, source: str) -> tuple[Host, ...]:
    """The hosts of a hostfile's text; ``source`` names the file in error messages."""
    hosts: list[Host] = []
    names: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}:{number}"
        address, *options = line.split()
        m = _ADDRESS.fullmatch(address)
        if not m:
            raise InputError(f"{where}: {address!r} is not [user@]host[:port]")
        user, port_text = m.group("user"), m.group("port")
        host = m.group("v6") or m.group("host")
        if user is not None and not _USER.fullmatch(user):
            raise InputError(f"{where}: bad user name {user!r}")
        if m.group("v6") is None and not _HOST.fullmatch(host):
            raise InputError(f"{where}: bad host name {host!r}")
        port = None
        if port_text is not None:
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise InputError(f"{where}: bad port {port_text!r} (1-65535)")
            port = int(port_text)
        name = host
        for opt in options:
            key, sep, value = opt.partition("=")
            if key != "name" or not sep:
                raise InputError(f"{where}: unknown option {opt!r} (only name=NODE_NAME)")
            name = value
        if not valid_node_name(name):
            raise InputError(f"{where}: node name {name!r} must be {NODE_NAME_RULE}; give one with "
                             "name=NODE_NAME")
        if name in names:
            raise InputError(f"{where}: node name {name!r} is already used on line "
                             f"{names[name]}; give each host its own name=NODE_NAME")
        names[name] = number
        hosts.append(Host(host=host, name=name, rank=len(hosts), user=user, port=port,
                          line=number))
    if not hosts:
        raise InputError(f"{source}: no hosts (one [user@]host[:port] [name=NODE_NAME] a line)")
    return tuple(hosts)


def read_hostfile(path: str | Path) -> tuple[Host, ...]:
    from soak.tomlfile import read_regular_text

    return parse_hostfile(read_regular_text(path, "hostfile", InputError), str(path))
