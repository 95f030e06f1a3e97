"""Configuration of a simulated fleet: family, size, scenarios, tool faults, time line.

Scenario and fault specs are ``name`` or ``name:key=value,key=value``; several are joined by
commas (``healthy,hbm_creep:rate_mb_h=200,chips=0-3``): a comma-separated token holding ``=``
belongs to the scenario before it, a bare token that is not a scenario name continues the
previous value (``chips=0,2``). The config is saved as JSON next to the installed ``npu-smi``
and re-read on every call, so a test can switch a fault on while the fleet runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from soak.errors import InputError

FAMILIES = ("910b", "910_93", "310p")

# name -> {param: default}. Times in (scaled) hours or seconds as named; chips is a selection
# of chip indexes (0-based logical ids, row order of the table).
SCENARIOS: dict[str, dict[str, object]] = {
    "healthy": {},
    "idle": {"chips": "all"},
    "hbm_creep": {"rate_mb_h": 200.0, "onset_h": 0.0, "chips": "all"},
    "util_drops": {"period_s": 1800.0, "duration_s": 60.0, "offset_s": 0.0, "level_pct": 0.0, "chips": "all"},
    "hang": {"at_h": 1.0, "chips": "0"},
    "thermal": {"start_h": 1.0, "duration_h": 0.5, "peak_c": 95.0, "chips": "0"},
    "health_alarm": {"at_h": 1.0, "until_h": -1.0, "status": "Alarm", "codes": "A4025021+8C03A000", "chips": "0"},
    "comm_timeouts": {"rate_per_h": 6.0, "onset_h": 0.0, "kind": "mix", "rotate_every": 50, "pid": 0},
    "ecc_errors": {"single_per_h": 2.0, "double_per_h": 0.0, "onset_h": 0.0, "chips": "0"},
    "link_down": {"at_h": 1.0, "until_h": -1.0, "chips": "0"},
    # the port goes down for down_s every every_h from onset_h: a flapping port, seen in
    # hccn_tool -link_stat's up count even where no -link poll falls into a down
    "link_flap": {"every_h": 0.25, "down_s": 5.0, "onset_h": 0.0, "chips": "0"},
}

# Tool faults. ``on`` picks the calls hit: info (the table), detail (-t/-m/-l), all.
# from_h/until_h bound the fault on the scaled time line (until_h < 0: no end).
_WINDOW = {"from_h": 0.0, "until_h": -1.0, "on": "all"}
FAULTS: dict[str, dict[str, object]] = {
    "slow": {"seconds": 5.0, **_WINDOW},
    "hang": {"seconds": 3600.0, **_WINDOW},
    "garbage": {**_WINDOW},
    "dcmi": {"ret": -8005, **_WINDOW},
    "vanish": {"chips": "0", **_WINDOW},
}


@dataclass(frozen=True)
class Spec:
    """One scenario or fault with its parameters (defaults filled in)."""

    name: str
    params: Mapping[str, object] = field(default_factory=dict)

    def get(self, key: str) -> object:
        return self.params[key]

    def num(self, key: str) -> float:
        return float(self.params[key])  # type: ignore[arg-type]


def _coerce(default: object, raw: str, what: str) -> object:
    try:
        if isinstance(default, bool):
            return raw.lower() in ("1", "true", "yes")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except ValueError:
        raise InputError(f"{what}: {raw!r} is not a number") from None
    return raw


def parse_specs(text: str | Iterable[str], table: Mapping[str, Mapping[str, object]], what: str) -> tuple[Spec, ...]:
    """Parse ``name:k=v,k=v,name2`` (or a list of such strings) against a table of defaults."""
    texts = [text] if isinstance(text, str) else list(text)
    specs: list[tuple[str, dict[str, str]]] = []
    last_key: str | None = None
    for chunk in texts:
        for token in (t.strip() for t in chunk.split(",")):
            if not token:
                continue
            name, _, rest = token.partition(":")
            if "=" not in name and (name in table or rest):
                if name not in table:
                    raise InputError(f"{what} {name!r} is unknown (known: {', '.join(table)})")
                specs.append((name, {}))
                last_key = None
                token = rest
                if not token:
                    continue
            if "=" in token:
                if not specs:
                    raise InputError(f"{what} parameter {token!r} comes before any {what} name")
                key, _, value = token.partition("=")
                specs[-1][1][key.strip()] = value.strip()
                last_key = key.strip()
            elif specs and last_key:  # "chips=0,2": a bare token continues the value
                specs[-1][1][last_key] += "," + token
            else:
                raise InputError(f"{what} {token!r} is unknown (known: {', '.join(table)})")
    out = []
    for name, raw in specs:
        defaults = table[name]
        params: dict[str, object] = dict(defaults)
        for key, value in raw.items():
            if key not in defaults:
                raise InputError(
                    f"{what} {name}: unknown parameter {key!r} (known: {', '.join(defaults) or 'none'})"
                )
            params[key] = _coerce(defaults[key], value, f"{what} {name}.{key}")
        out.append(Spec(name, params))
    return tuple(out)


def parse_chips(selection: object, n_chips: int, what: str = "chips") -> frozenset[int]:
    """``all``, ``3``, ``0-3``, ``0+2+5`` or ``0,2`` -> chip indexes."""
    text = str(selection).strip().lower()
    if text in ("all", "*", ""):
        return frozenset(range(n_chips))
    chosen: set[int] = set()
    for part in text.replace("+", ",").split(","):
        lo, sep, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise InputError(f"{what}: {selection!r} is not a chip selection (use all, 3, 0-3, 0+2)") from None
        if a < 0 or b >= n_chips or a > b:
            raise InputError(f"{what}: {selection!r} is outside chips 0-{n_chips - 1}")
        chosen.update(range(a, b + 1))
    return frozenset(chosen)


@dataclass(frozen=True)
class SimConfig:
    """Everything that decides what the simulated ``npu-smi`` prints."""

    family: str = "910b"
    chips: int = 8
    scenarios: tuple[Spec, ...] = (Spec("healthy"),)
    faults: tuple[Spec, ...] = ()
    seed: int = 0
    time_scale: float = 1.0
    origin: float = field(default_factory=time.time)  # wall unix time the fleet started
    plog_dir: str | None = None
    fixed_elapsed_s: float | None = None  # freeze the time line (tests, screenshots)
    npu_id_base: int = 0
    version: str | None = None  # npu-smi version string; family default when None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise InputError(f"--family {self.family!r} is unknown (known: {', '.join(FAMILIES)})")
        if self.chips < 1 or self.chips > 64:
            raise InputError(f"--chips {self.chips}: must be between 1 and 64")
        if self.family == "910_93" and self.chips % 2:
            raise InputError(f"--chips {self.chips}: a 910_93 NPU id holds 2 chips, give an even count")
        if self.time_scale <= 0:
            raise InputError(f"--time-scale {self.time_scale}: must be greater than 0")
        for spec in (*self.scenarios, *self.faults):
            if "chips" in spec.params:
                parse_chips(spec.params["chips"], self.chips, f"{spec.name}.chips")
        if any(s.name == "comm_timeouts" for s in self.scenarios) and not self.plog_dir:
            raise InputError("scenario comm_timeouts needs --plog-dir (where the plog files go)")

    @classmethod
    def build(
        cls,
        *,
        scenario: str | Iterable[str] = "healthy",
        fault: str | Iterable[str] = (),
        **kwargs: object,
    ) -> SimConfig:
        """Config from spec strings, as the CLI takes them."""
        return cls(
            scenarios=parse_specs(scenario, SCENARIOS, "scenario") or (Spec("healthy"),),
            faults=parse_specs(fault, FAULTS, "fault"),
            **kwargs,  # type: ignore[arg-type]
        )

    def elapsed_s(self, wall: float | None = None) -> float:
        """Scaled seconds since the fleet started (``ScaledClock`` semantics)."""
        if self.fixed_elapsed_s is not None:
            return self.fixed_elapsed_s
        wall = time.time() if wall is None else wall
        return max(0.0, (wall - self.origin) * self.time_scale)

    def to_json(self) -> str:
        data = asdict(self)
        data["scenarios"] = [{"name": s.name, "params": dict(s.params)} for s in self.scenarios]
        data["faults"] = [{"name": s.name, "params": dict(s.params)} for s in self.faults]
        return json.dumps(data, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SimConfig:
        data = json.loads(text)
        data["scenarios"] = tuple(Spec(s["name"], s["params"]) for s in data["scenarios"])
        data["faults"] = tuple(Spec(s["name"], s["params"]) for s in data["faults"])
        return cls(**data)

    def save(self, path: str | Path) -> None:
        # Written to a temp name then renamed: a call running now never reads half a file.
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json() + "\n", encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path) -> SimConfig:
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    def with_faults(self, fault: str | Iterable[str]) -> SimConfig:
        return replace(self, faults=parse_specs(fault, FAULTS, "fault"))
