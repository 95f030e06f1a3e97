"""The link test's pair schedule and the slow-link fault, in-process."""

from __future__ import annotations

import pytest

from soak.errors import InputError
from soak.workloads.inject import Injector, parse_inject
from soak.workloads.linktest import pairs_of, rounds_of


@pytest.mark.parametrize("n", range(2, 21))
def test_every_pair_once_in_rounds_of_disjoint_pairs(n):
    rounds = rounds_of(n)
    flat = [p for r in rounds for p in r]
    assert sorted(flat) == pairs_of(n) and len(set(flat)) == len(flat)
    for r in rounds:
        ends = [x for p in r for x in p]
        assert len(ends) == len(set(ends))  # no node in two transfers of one round
    if n <= 16:  # all pairs, a round-robin tournament: as few rounds as possible
        assert len(flat) == n * (n - 1) // 2 and len(rounds) == (n - 1 if n % 2 == 0 else n)
    else:  # ring neighbours only
        assert len(flat) == n and len(rounds) == (2 if n % 2 == 0 else 3)
        assert (0, n - 1) in flat and (0, 1) in flat


def test_slow_link_parses_a_node_rank_and_a_fraction():
    s = parse_inject("slow-link:1")
    assert (s.kind, s.node_rank, s.rank, s.factor) == ("slow-link", 1, None, 0.3)
    assert parse_inject("slow-link:2,0.5").factor == 0.5
    for bad, words in (("slow-link:1,1.5", "FRACTION must be a number between 0 and 1"),
                       ("slow-link:x", "NODE (a node rank) must be an integer"),
                       ("slow-link:1,0.3,2", "expected slow-link:NODE[,FRACTION]")):
        with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
            parse_inject(bad)


def test_slow_link_delays_only_the_named_nodes_transfers_by_its_fraction(tmp_path):
    spec = parse_inject("slow-link:1,0.3")

    def inj(node_rank):
        return Injector([spec], rank=0, run_dir=tmp_path, workload="lm", emit=lambda *a: None,
                        allocate=lambda n: n, node_rank=node_rank)

    took = 0.7
    extra = inj(1).link_delay(took)
    assert took / (took + extra) == pytest.approx(0.7)  # busbw 30 % lower
    assert inj(0).link_delay(took) == 0.0 and inj(None).link_delay(took) == 0.0
