"""One node's part of a cluster run: join, wait for the others, watch them, restart together.

Nodes never talk to each other except through torchrun's rendezvous and the shared store:

- **join**: a row in ``nodes`` (the run row is created by whichever node comes first); a
  node with another plan or node count is refused in one line naming it;
- **barrier**: every node waits, at most ``cluster.join_timeout``, until all have joined and
  recorded their manifest and preflight; the manifests must agree on every version
  (``version_drift``), else the cluster preflight fails naming the nodes and fields;
- **generation**: every whole-job restart starts a new torchrun rendezvous id,
  ``<run>-g<generation>``, never a rejoin of a running rendezvous (not dependable). The node
  whose workload fails first moves the generation (compare and set) and names itself;
- **liveness**: every node touches ``last_seen``; the leader marks a node silent for
  ``cluster.node_silence`` as lost;
- **the judging lease**: the leader is the one node holding the run's lease in the store
  (``runs.leader``, ``runs.lease_until``), a compare and set on the store's clock with a term
  of ``cluster.node_silence``. Its holder renews it every second; once it has expired the
  lowest rank still alive (rank 0 unless it is gone) takes it over, and at the end a free or
  expired lease goes to whichever node ends after it expired (the last one standing). Only
  the holder analyses the cluster, marks nodes lost and writes the run's end and verdict,
  once (``finish``); other nodes stop once it has stopped or failed;
- **rendezvous host**: a generation's c10d store is hosted by one node, rank 0 as the plan
  says until it is gone; then the leader moves the next generation's rendezvous to the live
  node of lowest rank, at the address it joined with (``soak.cluster.node.node_address``)
  and the plan's port, in the same compare and set that starts that generation;
- **one clock**: liveness, leadership and loss are measured on the store's clock (the
  database's), never on a node's own; a node whose clock is further than
  ``cluster.max_clock_offset`` from the store's is refused at join, naming its offset, so the
  samples and events every node stamps with its own clock stay on one time line.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from soak.clock import ScaledClock
from soak.cluster.node import endpoint, version_drift
from soak.config import Plan
from soak.errors import ClusterError
from soak.store import NodeRecord, RunRecord, Store
from soak.workloads.launch import Rendezvous

log = logging.getLogger("soak.cluster")

ALIVE = ("joined", "running", "finished")


def silent(nodes: list[NodeRecord], now: float, silence_s: float, *, but: str | None = None) -> list[NodeRecord]:
    """The nodes still training (by their rows) not seen for longer than ``silence_s`` on the
    store's clock ``now``: lost. ``but``: the node asking, never lost to itself."""
    return [n for n in nodes
            if n.name != but and n.status in ("joined", "running") and now - n.last_seen > silence_s]


@dataclass(frozen=True)
class RendezvousHost:
    """Where a generation of the cluster job meets: the node hosting torchrun's c10d store and
    the endpoint the others reach it at. The run row keeps it as ``NODE@HOST:PORT``
    (``runs.rendezvous``; an endpoint holds no ``@``); none kept: the plan's, on node rank 0."""

    node: str | None  # None: node rank 0, whose address the plan's cluster.rendezvous is
    endpoint: str

    @classmethod
    def of_run(cls, stored: str | None, planned: str) -> RendezvousHost:
        if not stored:
            return cls(None, planned)
        node, at, where = stored.rpartition("@")
        return cls(node if at else None, where)

    def stored(self) -> str:
        return f"{self.node}@{self.endpoint}"

    def hosted_by(self, node: NodeRecord | ClusterMember) -> bool:
        name = node.name if isinstance(node, NodeRecord) else node.node
        return self.node == name if self.node is not None else node.rank == 0


@dataclass
class ClusterMember:
    plan: Plan
    store: Store
    run_id: str
    node: str
    rank: int
    sleep: Callable[[float], None] = time.sleep
    wall: Callable[[], float] = time.time  # times its waits and looks
    generation: int = 0
    nnodes: int = 0
    clock_offset_s: float | None = None  # this node's clock minus the store's, last measured
    rendezvous_at: RendezvousHost | None = None  # of the generation last read (rendezvous())
    _last_touch: float = 0.0
    leading: bool = False  # this node held the judging lease at its last look
    # the run's time line, from its record at the join: an accelerated run's events are stamped
    # on it, as its samples and its workloads' events are
    clock: ScaledClock | None = None

    def __post_init__(self) -> None:
        self.nnodes = self.plan.cluster.nodes

    @property
    def nodes(self) -> int:
        return self.plan.cluster.nodes

    def stamp(self) -> float:
        """Now on the run's time line: what this node's events and a node's end are stamped
        with (the wall clock before it has joined)."""
        now = self.wall()
        return now if self.clock is None else self.clock.to_scaled(now)

    def clock_offset(self) -> float:
        """This node's clock minus the store's (seconds), the round trip halved."""
        t0 = self.wall()
        store = self.store.store_now()
        t1 = self.wall()
        self.clock_offset_s = (t0 + t1) / 2 - store
        return self.clock_offset_s

    def check_clock(self) -> float:
        """The offset to the store's clock; ClusterError past ``cluster.max_clock_offset``."""
        offset = self.clock_offset()
        bound = self.plan.cluster.max_clock_offset_s
        if abs(offset) > bound:
            raise ClusterError(
                f"node {self.node}: its clock is {offset:+.1f} s off the store's (bound {bound:g} s, "
                f"cluster.max_clock_offset): synchronise it (chrony or NTP) and start the agent again")
        return offset

    def join(self, run_values: dict[str, Any], *, host: str, listen: str | None) -> RunRecord:
        offset = self.check_clock()  # before anything is written: a refused node leaves nothing
        rec = self.store.join_cluster(self.run_id, node=self.node, rank=self.rank, nodes=self.nodes,
                                      plan_digest=self.plan.digest(), joined_ts=self.wall(), run=run_values,
                                      host=host, listen=listen, live_within_s=self.plan.cluster.node_silence_s)
        self.clock = ScaledClock.of_run(rec)
        self.store.add_event(self.run_id, "node_joined", ts=self.stamp(), node=self.node,
                             message=f"node {self.node} (rank {self.rank}) joined from {host}",
                             detail={"rank": self.rank, "host": host, "hostname": socket.gethostname(),
                                     "clock_offset_s": round(offset, 3)})
        log.info("joined cluster run %s as node %s (rank %d of %d)", self.run_id, self.node, self.rank, self.nodes)
        return rec

    def prepared(self, *, manifest: dict[str, Any] | None, preflight: str | None, chips: int | None) -> None:
        self.store.touch_node(self.run_id, self.node, manifest=manifest or {}, preflight=preflight, chips=chips)

    def barrier(self, say: Callable[[str], None]) -> list[NodeRecord]:
        """Wait until every node joined and is prepared; the version lock, checked."""
        deadline = self.wall() + self.plan.cluster.join_timeout_s
        said = 0.0
        while True:
            nodes = self.store.cluster_nodes(self.run_id)
            # prepared, whatever became of them since: a node that failed the version lock
            # first still counts, so every node finds the same difference
            ready = [n for n in nodes if n.manifest is not None]
            if len(ready) >= self.nodes:
                break
            run = self.store.get_run(self.run_id)
            if run is not None and run.status != "running":
                self.store.update_node(self.run_id, self.node, status="failed", ended_ts=self.stamp())
                raise ClusterError(f"cluster run {self.run_id} is {run.status} (see soak cluster status)")
            if self.wall() >= deadline:
                have = {n.rank for n in ready}
                missing = [str(r) for r in range(self.nodes) if r not in have]
                msg = (f"cluster run {self.run_id}: only {len(ready)} of {self.nodes} nodes joined within "
                       f"{self.plan.cluster.join_timeout_s:.0f} s (missing rank {', '.join(missing)}; joined: "
                       f"{', '.join(n.name for n in ready) or 'none'})")
                self.store.add_event(self.run_id, "stop", ts=self.stamp(), node=self.node, message=msg,
                                     detail={"reason": "join_timeout", "missing_ranks": missing,
                                             "joined": [n.name for n in ready], "nodes": self.nodes,
                                             "join_timeout_s": self.plan.cluster.join_timeout_s})
                self.store.update_node(self.run_id, self.node, status="failed", ended_ts=self.stamp())
                raise ClusterError(msg)
            self.touch(force=True)
            if self.wall() - said >= 10:
                said = self.wall()
                say(f"waiting for nodes: {len(ready)} of {self.nodes} ready")
            self.sleep(0.5)
        drift = version_drift({n.name: n.manifest for n in ready})
        if drift:
            for line in drift:
                log.error("%s", line)
            self.store.add_event(self.run_id, "preflight", ts=self.stamp(), node=self.node,
                                 message="cluster preflight failed: " + "; ".join(drift),
                                 detail={"status": "fail", "version_drift": drift})
            self.store.update_node(self.run_id, self.node, status="failed", ended_ts=self.stamp())
            self.store.update_run(self.run_id, status="failed", verdict="fail", ended_ts=self.stamp())
            raise ClusterError("\n".join(drift))
        self.store.touch_node(self.run_id, self.node, status="running")
        return ready

    # ------------------------------------------------------------------ during the run
    def touch(self, *, force: bool = False, **values: Any) -> None:
        now = self.wall()  # how often: this node's own clock; what is written: the store's
        if force or now - self._last_touch >= 1.0:
            self._last_touch = now
            self.store.touch_node(self.run_id, self.node, **values)

    def rendezvous(self, local_addr: str | None = None) -> Rendezvous:
        """The torchrun rendezvous of the job's current generation; ``local_addr``: where the
        other nodes reach this one (the store it may share with the job's ranks listens there)."""
        run = self.store.get_run(self.run_id)
        if run is not None:
            self.generation = run.generation
        alive = [n for n in self.store.cluster_nodes(self.run_id) if n.status in ALIVE]
        self.nnodes = max(1, len(alive))
        c = self.plan.cluster
        assert c.rendezvous is not None
        # read with the generation, from the same row: a generation is never met elsewhere
        at = RendezvousHost.of_run(None if run is None else run.rendezvous, c.rendezvous)
        self.rendezvous_at = at
        return Rendezvous(nnodes=self.nnodes, endpoint=at.endpoint, rdzv_id=f"{self.run_id}-g{self.generation}",
                          is_host=at.hosted_by(self), join_timeout_s=c.join_timeout_s, local_addr=local_addr)

    def move_rendezvous(self, lost: Sequence[NodeRecord] = ()) -> RendezvousHost | None:
        """The leader's look after ``find_lost``: when the node hosting the job's rendezvous is
        gone (lost, failed, stopped), no generation can form there again (torchrun has no other
        store). Start the next generation on the live node of lowest rank, at the address it
        joined with and the plan's port, in one compare and set, so that whoever reads the new
        generation reads where it meets. The new host; None when nothing moved (the host is
        alive, or the generation moved meanwhile: looked at again on the next call)."""
        run = self.store.get_run(self.run_id)
        if run is None or run.status != "running":
            return None
        c = self.plan.cluster
        assert c.rendezvous is not None
        at = RendezvousHost.of_run(run.rendezvous, c.rendezvous)
        nodes = self.store.cluster_nodes(self.run_id)
        gone = next((n for n in nodes if at.hosted_by(n)), None)
        live = [n for n in nodes if n.status in ("joined", "running") and n.host]
        if gone is None or gone.status in ALIVE or not live:
            return None
        to = min(live, key=lambda n: n.rank)
        new = RendezvousHost(to.name, endpoint(str(to.host), c.rendezvous.rpartition(":")[2]))
        if not self.store.bump_generation(self.run_id, run.generation, rendezvous=new.stored()):
            return None
        generation = run.generation + 1
        msg = (f"node {gone.name} ({gone.status}) hosted the job's rendezvous: the job restarts on the other nodes "
               f"(generation {generation}), its rendezvous on node {to.name} at {new.endpoint}")
        log.warning("%s", msg)
        self.store.add_event(self.run_id, "cluster_restart", ts=self.stamp(), node=self.node, message=msg,
                             detail={"lost": [n.name for n in lost], "generation": generation,
                                     "rendezvous": new.endpoint, "rendezvous_node": to.name,
                                     "previous_rendezvous": at.endpoint, "previous_rendezvous_node": gone.name,
                                     "previous_status": gone.status})
        return new

    def stored_generation(self) -> int:
        run = self.store.get_run(self.run_id)
        return self.generation if run is None else run.generation

    def job_failed(self, workload: str, message: str, rank: int | None,
                   failure: dict[str, Any] | None = None) -> bool:
        """This node's workload failed: move the job to its next generation. True when this
        node was the first to see this generation fail (it is named once for the cluster).
        ``failure``: its kind and the supervisor's detail, kept with the event."""
        first = self.store.bump_generation(self.run_id, self.generation)
        if first:
            self.store.add_event(self.run_id, "cluster_restart", ts=self.stamp(), workload=workload, rank=rank,
                                 node=self.node,
                                 message=f"{message} on node {self.node}: the whole job restarts "
                                         f"(generation {self.generation + 1})",
                                 detail={"node": self.node, "generation": self.generation + 1,
                                         **({"failure": failure} if failure else {})})
        return first

    @property
    def lease_s(self) -> float:
        """The judging lease's term: ``cluster.node_silence``, so a holder gone silent loses the
        lead when it would be found lost, and a store outage shorter than that costs none."""
        return self.plan.cluster.node_silence_s

    def leader(self) -> bool:
        """Whether this node holds the run's judging lease now: renewed when it held it, taken
        when it is free or expired and this node is the lowest rank still alive. The store's
        compare and set grants it to one node at a time, whatever each node believes. A node
        that does not hold it reads every node's row (``first_alive``) only while the lease is
        open to it: every node looks each second, and at 1,024 nodes those reads were a million
        node rows a second (benchmarks/bench_cluster_load.py)."""
        if self.leading or (self.store.lease_open(self.run_id, self.node) and self.first_alive()):
            self.leading = self.store.take_lease(self.run_id, self.node, self.lease_s)
        return self.leading

    def lead_at_end(self) -> bool:
        """At the end of this node's part, whether it judges the run: the holder keeps its
        lease; a free or expired one goes to this node whatever its rank (the others may be
        gone: the last one standing judges)."""
        self.leading = self.store.take_lease(self.run_id, self.node, self.lease_s)
        return self.leading

    def judge_ended(self, run: RunRecord) -> NodeRecord | None:
        """The lease holder's node once it has stopped or failed: it judges the run as it ended
        there, so this node's part ends too. None while the holder goes on, or none holds the
        lease."""
        if run.leader is None or run.leader == self.node or run.lease_until is None:
            return None
        for n in self.store.cluster_nodes(self.run_id, name=run.leader):  # every node looks each second: one row
            if n.status in ("stopped", "failed"):
                return n
        return None

    def finish(self, *, status: str, ended_ts: float, verdict: str | None, run_dir: str | None) -> bool:
        """The run's end and verdict, written if this node holds the lease (the write releases
        it); False: refused, another node holds it or has judged the run."""
        done = self.store.finish_cluster_run(self.run_id, self.node, status=status, ended_ts=ended_ts,
                                             verdict=verdict, run_dir=run_dir)
        self.leading = False
        return done

    def first_alive(self) -> bool:
        """Whether this node is the lowest rank among the nodes still alive (rank 0 unless it
        is gone), alive on the store's clock: the one that takes a free or expired lease."""
        now = self.store.store_now()
        silence = self.plan.cluster.node_silence_s
        alive = [n for n in self.store.cluster_nodes(self.run_id)
                 if n.status in ALIVE and (now - n.last_seen <= silence or n.name == self.node)]
        return bool(alive) and min(n.rank for n in alive) == self.rank

    def find_lost(self) -> list[NodeRecord]:
        """Nodes silent past the bound on the store's clock: marked lost, with a ``node_lost``
        event naming each (stamped on this node's clock, the run's time line)."""
        now = self.store.store_now()
        silence = self.plan.cluster.node_silence_s
        lost = silent(self.store.cluster_nodes(self.run_id), now, silence, but=self.node)
        for n in lost:
            at = self.stamp()
            self.store.update_node(self.run_id, n.name, status="lost", ended_ts=at)
            msg = f"node {n.name} (rank {n.rank}) lost: not seen for {now - n.last_seen:.0f} s (bound {silence:.0f} s)"
            log.error("%s", msg)
            self.store.add_event(self.run_id, "node_lost", ts=at, node=n.name, message=msg,
                                 detail={"node": n.name, "rank": n.rank, "last_seen": n.last_seen,
                                         "policy": self.plan.cluster.on_node_lost,
                                         "silent_s": round(now - n.last_seen, 3), "bound_s": silence})
        return lost

    def wait_for_others(self, bound_s: float) -> list[NodeRecord]:
        """At the end, the leader waits (bounded) for every other node to finish or be lost,
        holding its lease meanwhile."""
        deadline = self.wall() + bound_s
        while True:
            self.leader()
            self.find_lost()
            nodes = self.store.cluster_nodes(self.run_id)
            open_ = [n for n in nodes if n.name != self.node and n.status in ("joined", "running")]
            if not open_ or self.wall() >= deadline:
                return nodes
            self.touch()
            self.sleep(0.5)
