"""What every fuzz test checks, and the random values it feeds.

A case runs ``soak.cli.main`` in this process (thousands of cases fit in seconds, where a
process each would take minutes). Whatever the input, the command must end with exit status
0, 1 or 2, and a 2 must be one line ``soak: error: ...``: any other exception escaping is
the bug the fuzzing looks for, and it fails the test with the case that raised it.

A run is small by default, so the suite stays fast; ``SOAK_FUZZ_CASES=N`` runs N cases in every
fuzz test for a longer hunt, and ``SOAK_FUZZ_SEED=S`` draws them from another seed. Each test
names its seed in every failure, so ``SOAK_FUZZ_SEED=S SOAK_FUZZ_CASES=N`` replays a failure
case for case.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
from dataclasses import dataclass

from soak.cli import main


def fuzz_cases(default: int) -> int:
    """How many cases a fuzz test runs: its own small ``default``, or ``SOAK_FUZZ_CASES``."""
    return int(os.environ.get("SOAK_FUZZ_CASES") or default)


def fuzz_seed(default: int) -> int:
    """The seed a fuzz test draws its cases from: its own fixed ``default``, or ``SOAK_FUZZ_SEED``.
    Printed, so the output of a failed test names it."""
    seed = int(os.environ.get("SOAK_FUZZ_SEED") or default)
    print(f"fuzz seed {seed}: replay with SOAK_FUZZ_SEED={seed}")
    return seed


@dataclass
class Outcome:
    rc: int
    err: str
    out: str


def run_cli(argv: list[str], case: str) -> Outcome:
    """``soak ARGV`` in-process; raises AssertionError naming ``case`` on a broken promise."""
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = main(argv)
    except BaseException as exc:  # SystemExit too: ARGV is valid, so only a bug exits on its own
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise AssertionError(f"{type(exc).__name__} escaped: {exc!r}"[:500] + f" in {case[:1500]}") from exc
    text = err.getvalue()
    assert rc in (0, 1, 2), f"{case}: exit status {rc}; stderr {text[-500:]!r}"
    if rc == 2:
        lines = text.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("soak: error: "), f"{case}: not one line: {text[-800:]!r}"
    return Outcome(rc, text, out.getvalue())


def mutate_bytes(rng: random.Random, data: bytes, edits: int | None = None) -> bytes:
    """Random byte-level damage: flips, inserts, deletes, duplicated and truncated spans."""
    buf = bytearray(data)
    for _ in range(edits or rng.randint(1, 8)):
        if not buf:
            buf += bytes([rng.randrange(256)])
            continue
        i = rng.randrange(len(buf))
        op = rng.randrange(6)
        if op == 0:
            buf[i] = rng.randrange(256)
        elif op == 1:
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 2:
            buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 3:
            del buf[i:i + rng.randint(1, 16)]
        elif op == 4:
            j = rng.randrange(len(buf))
            buf[i:i] = buf[j:j + rng.randint(1, 64)]
        else:
            del buf[i:]
    return bytes(buf)


DEEP = 3000  # deeper than any parser's recursion limit


def toml_value(rng: random.Random) -> str:
    """A TOML value of any type and shape, valid TOML, chosen to hit edge cases."""
    pool = [
        "0", "-1", "1", "5", "9223372036854775807", "-9223372036854775808", "0x7fffffff",
        "nan", "inf", "-inf", "+inf", "1e309", "-1e309", "1e300", "1e-320", "0.5", "-0.0", "3.5e2",
        "true", "false", '""', '"0"', '"-5m"', '"72h"', '"1e400h"', '"999999999999999999999999d"',
        '"0.0000001s"', '"1GiB"', '"99999999999999999999999999999999999GiB"', '"x"', '"\\u0000"',
        '"/dev/zero"', '"/"', '"../.."', '"default"', '"sim"', '"cpu"', '"lm"', '"gemm"', '"tiny"',
        '"crash:40"', '"leak:50MB/min"', '"--help"', '"--steps"', '"-h"', '"中文"', '"' + "y" * 5000 + '"',
        "[]", "[1, 2]", '["a", 1]', '["--help"]', '["--steps", "x"]', '["--ckpt-every", "-3"]',
        "{}", '{a = 1}', '{"x.y" = 1}', '{"thermal.threshold_c" = nan}', '{"severity.hang" = 1}',
        '{"phases" = 1}', '{"severity" = 5}', '{"a" = {"b" = 1}}',
        "1979-05-27T07:32:00Z", "07:32:00", "1979-05-27",
        "[" * DEEP + "]" * DEEP, "[" * 40 + "1" + "]" * 40, "{a=" * 50 + "1" + "}" * 50,
        ":9100", '"127.0.0.1:99999"', '"[::1]:0"', '"host:"',
    ]
    return rng.choice(pool)
