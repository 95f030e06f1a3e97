"""Entry of the installed ``npu-smi`` script: ``python -m soak.telemetry.sim --config F ARGS``."""

from __future__ import annotations

import sys

from soak.telemetry.sim.call import answer


def main(argv: list[str]) -> int:
    out, err, rc = answer(argv)
    sys.stderr.write(err)
    sys.stdout.write(out)
    sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
