"""Evaluate the anomaly detectors on labelled synthetic traces and NAB machine metrics.

    python benchmarks/eval_detectors.py [--healthy N] [--reps R] [--format json]

Prints per detector family and fault size (multiples of the documented detection floor):
detection rate, largest error of reported slope / period / onset / change, and false
findings per healthy series-day; then false findings outside the labelled windows of the
NAB real machine metrics. Exit 1 when a target is not met.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from soak.analysis.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
