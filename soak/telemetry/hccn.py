"""``hccn_tool``: the RoCE network port of each Ascend chip.

``hccn_tool -i N`` takes the chip's *logic/physical device id* (``Chip Logic ID`` of
``npu-smi info -m``), not the NPU card id. Results are one ``key: value`` line or a small
block; a driver warning line (``call drvMngGetConsoleLogLevel failed``) may come first and is
skipped. Failure texts (``Device ID is out of the valid range.``, ``Cmd execute failed!``)
raise ToolError, through the runner or, for recorded text, through the parsers here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from soak.errors import ToolError
from soak.telemetry.runner import KNOWN_ERROR_TEXTS, Runner, RunnerLike, find_error_text

TOOL = "hccn_tool"


def _check(text: str) -> None:
    hit = find_error_text(text, KNOWN_ERROR_TEXTS)
    if hit is not None:
        raise ToolError(TOOL, hit, kind="error_text")


def _garbage(what: str, text: str) -> ToolError:
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return ToolError(TOOL, f"no {what} in output (starts with {first[:60]!r})", kind="garbage")


@dataclass(frozen=True, slots=True)
class LinkStatus:
    """``hccn_tool -i N -link -g``: ``link status: UP|DOWN``."""

    up: bool | None
    status: str


def parse_link(text: str) -> LinkStatus:
    _check(text)
    m = re.search(r"link status\s*:\s*(\S+)", text, re.IGNORECASE)
    if not m:
        raise _garbage("link status", text)
    word = m.group(1).upper()
    return LinkStatus({"UP": True, "DOWN": False}.get(word), word)


@dataclass(frozen=True, slots=True)
class NetHealth:
    """``hccn_tool -i N -net_health -g``. ``healthy`` is None for states that are neither
    a pass nor a fault (``Init``: detection not started yet)."""

    healthy: bool | None
    status: str


_NET_OK = {"success", "healthy"}
_NET_BAD = {"fault", "socket failed", "detect ip set failed"}


def parse_net_health(text: str) -> NetHealth:
    _check(text)
    m = re.search(r"net health status\s*:\s*(.+)", text, re.IGNORECASE)
    if not m:
        raise _garbage("net health status", text)
    status = m.group(1).strip()
    low = status.lower()
    healthy = True if low in _NET_OK else False if low in _NET_BAD else None
    return NetHealth(healthy, status)


def parse_stat(text: str) -> Mapping[str, int]:
    """``hccn_tool -i N -stat -g``: ``packet statistics:`` then ``name:count`` lines."""
    _check(text)
    counts: dict[str, int] = {}
    for line in text.splitlines():
        m = re.fullmatch(r"\s*([a-z][a-z0-9_]*)\s*:\s*(\d+)\s*", line)
        if m:
            counts[m.group(1)] = int(m.group(2))
    if not counts and "packet statistics" not in text:
        raise _garbage("packet statistics", text)
    return MappingProxyType(counts)


@dataclass(frozen=True, slots=True)
class LinkStat:
    """``hccn_tool -i N -link_stat -g``: link flaps, newest record first, times as printed."""

    current_time: str | None
    link_up_count: int | None
    records: tuple[tuple[str, str], ...]  # (time, "UP" | "DOWN")

    @property
    def link_down_count(self) -> int:
        return sum(1 for _, state in self.records if state == "DOWN")


_PREFIX = re.compile(r"^\s*\[dev(?:id|ice)\s*\d+\]")


def parse_link_stat(text: str) -> LinkStat:
    _check(text)
    current = None
    ups = None
    records: list[tuple[str, str]] = []
    seen = False
    for raw in text.splitlines():
        if not _PREFIX.match(raw):
            continue
        seen = True
        line = _PREFIX.sub("", raw).strip()
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "current time":
            current = value.strip()
        elif sep and key.strip().lower() == "link up count":
            ups = int(value.strip()) if value.strip().isdigit() else None
        else:
            m = re.fullmatch(r"(.+?)\s+LINK\s+(UP|DOWN)", line)
            if m:
                records.append((m.group(1).strip(), m.group(2)))
    if not seen:
        raise _garbage("link statistics", text)
    return LinkStat(current, ups, tuple(records))


def parse_speed(text: str) -> int | None:
    """``hccn_tool -i N -speed -g``: ``Speed: 100000 Mb/s`` -> 100000 (Mbit/s)."""
    _check(text)
    if "unknown!" in text.lower():
        return None
    m = re.search(r"Speed\s*:\s*(\d+)\s*Mb/s", text, re.IGNORECASE)
    if not m:
        raise _garbage("speed", text)
    return int(m.group(1))


def parse_bandwidth(text: str) -> tuple[float | None, float | None]:
    """``hccn_tool -i N -bandwidth -g``: (tx, rx) in MB/s."""
    _check(text)
    found: dict[str, float] = {}
    for m in re.finditer(r"Bandwidth\s+(TX|RX)\s*:\s*([0-9.]+)\s*MB/sec", text, re.IGNORECASE):
        found[m.group(1).upper()] = float(m.group(2))
    if not found:
        raise _garbage("bandwidth", text)
    return found.get("TX"), found.get("RX")


class HccnReader:
    """Reads one chip's network port through ``hccn_tool``; every call goes through ``runner``."""

    def __init__(self, hccn_tool: str = TOOL, runner: RunnerLike | None = None) -> None:
        self.hccn_tool = hccn_tool
        self.runner: RunnerLike = runner if runner is not None else Runner()

    def _run(self, device_id: int, *args: str) -> str:
        return self.runner([self.hccn_tool, "-i", str(device_id), *args]).stdout

    def link(self, device_id: int) -> LinkStatus:
        """Command line equivalent: ``hccn_tool -i N -link -g``."""
        return parse_link(self._run(device_id, "-link", "-g"))

    def net_health(self, device_id: int) -> NetHealth:
        """Command line equivalent: ``hccn_tool -i N -net_health -g``."""
        return parse_net_health(self._run(device_id, "-net_health", "-g"))

    def stat(self, device_id: int) -> Mapping[str, int]:
        """Packet counters. Command line equivalent: ``hccn_tool -i N -stat -g``."""
        return parse_stat(self._run(device_id, "-stat", "-g"))

    def link_stat(self, device_id: int) -> LinkStat:
        """Link flap history. Command line equivalent: ``hccn_tool -i N -link_stat -g``."""
        return parse_link_stat(self._run(device_id, "-link_stat", "-g"))

    def speed(self, device_id: int) -> int | None:
        """Port speed in Mbit/s. Command line equivalent: ``hccn_tool -i N -speed -g``."""
        return parse_speed(self._run(device_id, "-speed", "-g"))

    def bandwidth(self, device_id: int) -> tuple[float | None, float | None]:
        """(tx, rx) MB/s. Command line equivalent: ``hccn_tool -i N -bandwidth -g``."""
        return parse_bandwidth(self._run(device_id, "-bandwidth", "-g"))


def read_link_fields(hccn_tool: str, runner: RunnerLike | None, device_id: int) -> dict[str, object]:
    """The port's DeviceSample fields: ``link_up`` (``-link``) and ``link_up_count``
    (``-link_stat``: a flap between two polls shows there even when no poll saw it down).

    A ``-link`` failure raises (the caller counts it); a driver without ``-link_stat`` only
    leaves the count out, unless the tool timed out or is missing (raised: the pass stops).
    """
    reader = HccnReader(hccn_tool, runner)
    fields: dict[str, object] = {}
    up = reader.link(device_id).up
    if up is not None:
        fields["link_up"] = up
    try:
        count = reader.link_stat(device_id).link_up_count
    except ToolError as exc:
        if exc.kind in ("timeout", "missing"):
            raise
        count = None
    if count is not None:
        fields["link_up_count"] = count
    return fields
