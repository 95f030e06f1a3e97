"""The link test's pair schedule, the slow-link fault and the way to the store, in-process."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from soak.analysis import links as lk
from soak.config import plan_from_dict
from soak.daemon.heartbeat import StepAggregator
from soak.errors import ConfigError, InputError
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
        return Injector([spec], rank=0, run_dir=tmp_path, workload="lm", emit=lambda *a, **kw: None,
                        allocate=lambda n: n, node_rank=node_rank)

    took = 0.7
    extra = inj(1).link_delay(took)
    assert took / (took + extra) == pytest.approx(0.7)  # busbw 30 % lower
    assert inj(0).link_delay(took) == 0.0 and inj(None).link_delay(took) == 0.0


def test_a_link_test_heartbeat_becomes_a_link_test_event_with_its_pairs_on_the_run_time_line():
    pairs = [{"a": "node-0", "b": "node-1", "busbw_gbps": 9.5, "size_bytes": 1 << 20, "time_s": 1e-4}]
    rec = {"ts": 100.0, "workload": "lm", "rank": 0, "event": "link_test", "step": 0, "message": "link test",
           "link_test": {"when": "preflight", "pairs": pairs, "backend": "cuda", "device_name": "NVIDIA H200",
                         "injected": {}}}
    _, (ev,) = StepAggregator(to_ts=lambda t: t * 2).feed([rec])
    assert (ev["kind"], ev["ts"], ev["detail"]["pairs"], ev["detail"]["when"]) == ("link_test", 200.0, pairs, "preflight")
    tests = lk.from_events([SimpleNamespace(kind=ev["kind"], ts=ev["ts"], detail=ev["detail"])])
    assert tests.chip == "H200" and tests.results == (lk.LinkResult(200.0, "node-0", "node-1", 9.5, 1 << 20),)


def test_a_plan_refuses_a_slow_link_with_no_such_node_in_one_line():
    with pytest.raises(ConfigError, match=r"^faults.inject 'slow-link:1': slow-link needs a cluster run with node "
                                          r"rank 1 \(cluster.nodes is 1\)$"):
        plan_from_dict({"faults": {"inject": ["slow-link:1"]}})
    cluster = {"nodes": 2, "rendezvous": "h:29400"}
    run = {"db": "postgresql+psycopg://u@h/db", "id": "r1"}
    with pytest.raises(ConfigError, match="cluster.nodes is 2"):
        plan_from_dict({"faults": {"inject": ["slow-link:2"]}, "cluster": cluster, "run": run})
    plan = plan_from_dict({"faults": {"inject": ["slow-link:1,0.5"]}, "cluster": cluster, "run": run})
    assert plan.faults.inject == ("slow-link:1,0.5",)
