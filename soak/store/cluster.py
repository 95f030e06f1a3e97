"""The cluster half of the store: nodes joining a run, the job generation, the judging lease,
and the bucket summaries each node agent writes of its own chips (what the leader compares
and judges).

``ClusterStore`` is a part of ``soak.store.Store``, on top of the runs (``RunStore``) it
joins; its statements go through the engine's ``_retry``, ``_write``, ``_read`` and
``_read_tuples``, the one retry and error path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, func, insert, literal, or_, select, update
from sqlalchemy.engine import Connection

from soak.errors import StoreError
from soak.store import schema as S
from soak.store.records import RUN_STATUSES, NodeRecord, RunRecord
from soak.store.runs import RunStore


class ClusterStore(RunStore):
    """Cluster runs and chip buckets (a base of ``Store``).

    Liveness is kept on the store's clock, not on any node's: ``last_seen`` is written as the
    database's current time (``touch_node``) and read against it (``store_now``), so a node
    whose own clock is off can neither look lost nor make others look lost.
    """

    clock: Callable[[], float] | None = None
    """The store's clock (unix seconds) where a test sets one, to age a lease or a node
    without waiting; None: the database's own, always in a run."""

    def _now_sql(self) -> ColumnElement[Any]:
        """The database's current time, unix seconds, as an SQL expression (PostgreSQL: the
        server's clock at the statement, not the transaction's start; SQLite: the host's)."""
        if self.clock is not None:
            return literal(float(self.clock()))
        if self.engine.dialect.name == "postgresql":
            return func.extract("epoch", func.clock_timestamp())
        return (func.julianday("now") - literal(2440587.5)) * literal(86400.0)

    def store_now(self) -> float:
        """The store's clock now (unix seconds): the one clock of a cluster run's liveness."""
        return float(self._read(select(self._now_sql()))[0][0])

    def touch_node(self, run_id: str, node: str, **values: Any) -> None:
        """``last_seen`` of ``node`` set to the store's clock (with other columns)."""
        self.update_node(run_id, node, **values, last_seen=self._now_sql())

    def join_cluster(self, run_id: str, *, node: str, rank: int, nodes: int, plan_digest: str, joined_ts: float,
                     run: Mapping[str, Any], host: str | None = None, chips: int | None = None,
                     manifest: Mapping[str, Any] | None = None, listen: str | None = None,
                     live_within_s: float | None = None) -> RunRecord:
        """Join node ``node`` (rank ``rank``) to cluster run ``run_id``, creating the run if
        this node is the first. ``run`` holds ``create_run``'s values. Refused in one line:
        another plan, another node count, a rank another node holds, or (``live_within_s``:
        the run's node silence) the name of a node seen that recently from another host: a
        second agent given the same ``--node-name``. The same node from its own host (its
        agent resumed), or after it fell silent, takes the node's place."""
        def join(conn: Connection) -> None:
            if run:  # a resumed node joins a run that exists: nothing to create
                values = dict(run)
                values["plan"] = json.dumps(values.get("plan") or {}, default=str)
                conn.execute(self._insert_ignoring_duplicates(S.runs).values(
                    id=run_id, status="running", nodes=nodes, generation=0, plan_digest=plan_digest, **values))
            got = conn.execute(select(S.runs.c.nodes, S.runs.c.plan_digest, S.runs.c.status)
                               .where(S.runs.c.id == run_id)).one()
            # the node count first: it is part of the plan too, and the plainer reason
            if got.nodes != nodes:
                raise StoreError(f"node {node}: --nodes {nodes}, but cluster run {run_id} has {got.nodes} nodes")
            if got.plan_digest != plan_digest:
                raise StoreError(f"node {node}: its plan differs from cluster run {run_id}'s "
                                 f"(digest {plan_digest[:12]} vs {str(got.plan_digest)[:12]}): every node must run the same plan")
            n = S.nodes
            mine = conn.execute(select(n.c.name, n.c.status).where(n.c.run_id == run_id, n.c.rank == rank,
                                                                  n.c.name != node)).first()
            if mine is not None:
                raise StoreError(f"node {node}: rank {rank} of cluster run {run_id} is already node {mine.name}")
            row = dict(rank=rank, host=host, chips=chips, status="joined", joined_ts=joined_ts, last_seen=self._now_sql(),
                       manifest=None if manifest is None else json.dumps(manifest, default=str), listen=listen)
            held = conn.execute(select(n.c.host, n.c.status, n.c.last_seen, self._now_sql().label("now"))
                                .where(n.c.run_id == run_id, n.c.name == node)).first()
            if (held is not None and live_within_s is not None and held.status in ("joined", "running")
                    and held.host != host and held.last_seen is not None
                    and held.now - held.last_seen < live_within_s):
                raise StoreError(f"node {node}: cluster run {run_id}'s node {node} is live on {held.host} (seen "
                                 f"{held.now - held.last_seen:.0f} s ago): a second agent cannot take its name")
            if held is None:
                conn.execute(insert(n).values(run_id=run_id, name=node, restarts=0, **row))
            else:  # the same node again (its agent resumed): take its place
                conn.execute(update(n).where(n.c.run_id == run_id, n.c.name == node).values(**row))

        self._retry(join)
        rec = self.get_run(run_id)
        assert rec is not None
        return rec

    def cluster_nodes(self, run_id: str, *, name: str | None = None) -> list[NodeRecord]:
        """The run's nodes by rank (``name``: that node's row alone, if any)."""
        n = S.nodes
        where = [n.c.run_id == run_id, *([n.c.name == name] if name is not None else [])]
        rows = self._read(select(n).where(*where).order_by(n.c.rank, n.c.name))
        return [NodeRecord(**{**dict(r._mapping), "manifest": json.loads(r.manifest) if r.manifest else None})
                for r in rows]

    def update_node(self, run_id: str, node: str, **values: Any) -> None:
        """Change a node's columns (last_seen, status, preflight, restarts, ended_ts, ...)."""
        if values.get("status") is not None and values["status"] not in S.NODE_STATUSES:
            raise ValueError(f"node status must be one of {S.NODE_STATUSES}")
        if "manifest" in values and values["manifest"] is not None:
            values["manifest"] = json.dumps(values["manifest"], default=str)
        self._write(update(S.nodes).where(S.nodes.c.run_id == run_id, S.nodes.c.name == node).values(**values))

    def bump_generation(self, run_id: str, seen: int, *, rendezvous: str | None = None) -> bool:
        """Start the cluster job's next generation if it is still ``seen`` (compare and set:
        of several nodes that see the same failure, exactly one moves it); ``rendezvous``: the
        new generation meets there (``runs.rendezvous``), set in the same statement."""
        r = S.runs
        values: dict[str, Any] = {"generation": seen + 1}
        if rendezvous is not None:
            values["rendezvous"] = rendezvous
        res = self._write(update(r).where(r.c.id == run_id, r.c.generation == seen).values(**values))
        return bool(res.rowcount)

    # ------------------------------------------------------------------ the judging lease
    def take_lease(self, run_id: str, holder: str, ttl_s: float, *, force: bool = False) -> bool:
        """Compare and set on ``runs.leader``/``lease_until``: ``holder`` holds the judging lease
        of running cluster run ``run_id`` until the store's clock plus ``ttl_s`` when the lease
        is free, its own already (renewed, even once expired, while no other took it) or
        expired. True when ``holder`` holds it now. ``force``: taken whatever holds it and
        whatever the run's status (an operator judging a run by hand)."""
        r = S.runs
        now = self._now_sql()
        where = [r.c.id == run_id]
        if not force:
            where += [r.c.status == "running",
                      or_(r.c.leader.is_(None), r.c.leader == holder, r.c.lease_until.is_(None),
                          r.c.lease_until < now)]
        res = self._write(update(r).where(*where).values(leader=holder, lease_until=now + ttl_s))
        return bool(res.rowcount)

    def lease_open(self, run_id: str, holder: str) -> bool:
        """Whether ``take_lease`` would grant ``holder`` the judging lease of running cluster run
        ``run_id`` now (free, its own, or expired, on the store's clock): one row read, nothing
        written."""
        r = S.runs
        now = self._now_sql()
        rows = self._read(select(r.c.id).where(
            r.c.id == run_id, r.c.status == "running",
            or_(r.c.leader.is_(None), r.c.leader == holder, r.c.lease_until.is_(None), r.c.lease_until < now)))
        return bool(rows)

    def finish_cluster_run(self, run_id: str, holder: str, *, status: str, ended_ts: float,
                           verdict: str | None = None, run_dir: str | None = None) -> bool:
        """The end and verdict of cluster run ``run_id``, written by the holder of its judging
        lease alone, and once: the write releases the lease (``lease_until`` None) and keeps
        ``leader``, the one that judged. False: refused, nothing written (another holds the
        lease, or the run is judged already). ``run_dir``: the judge's run folder, which holds
        the ``report/analysis.json`` the report reads."""
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {RUN_STATUSES}")
        r = S.runs
        values: dict[str, Any] = dict(status=status, ended_ts=ended_ts, verdict=verdict, lease_until=None)
        if run_dir is not None:
            values["run_dir"] = run_dir
        res = self._write(update(r).where(r.c.id == run_id, r.c.leader == holder, r.c.lease_until.is_not(None))
                          .values(**values))
        if res.rowcount:
            return True
        # a commit whose answer was lost is tried again (the engine's retry): it finds its own
        # write there, not another's
        got = self.get_run(run_id)
        return (got is not None and got.leader == holder and got.lease_until is None
                and (got.status, got.ended_ts, got.verdict) == (status, ended_ts, verdict))

    # ------------------------------------------------------------------ chip buckets
    def add_buckets(self, run_id: str, node: str, rows: Iterable[Sequence[Any]]) -> int:
        """A node's bucket rows ``(device, metric, ts, value, n, covered_s)`` (``chip_buckets``);
        a bucket already stored is kept as it is (an agent resumed writes it again)."""
        out = [{"run_id": run_id, "node": node, "device": d, "metric": m, "ts": float(ts),
                "value": None if v is None else float(v), "n": int(n), "covered_s": float(c)}
               for d, m, ts, v, n, c in rows]
        if out:
            self._write(self._insert_ignoring_duplicates(S.chip_buckets), out)
        return len(out)

    def bucket_mark(self, run_id: str, node: str | None = None) -> float | None:
        """The start of the newest bucket ``node`` (any node) has written; None before the first."""
        b = S.chip_buckets
        where = [b.c.run_id == run_id, *([b.c.node == node] if node is not None else [])]
        return self._read(select(func.max(b.c.ts)).where(*where))[0][0]

    def load_buckets(self, run_id: str, metric: str | None = None) -> list[tuple[Any, ...]]:
        """Every node's bucket rows ``(node, device, metric, ts, value, n)`` with a value (of
        one ``metric``), as plain tuples ordered by metric, node, device and time: what the
        leader compares, read a metric at a time."""
        b = S.chip_buckets
        where = [b.c.run_id == run_id, b.c.value.is_not(None)]
        if metric is not None:
            where.append(b.c.metric == metric)
        return self._read_tuples(select(b.c.node, b.c.device, b.c.metric, b.c.ts, b.c.value, b.c.n)
                                 .where(*where).order_by(b.c.metric, b.c.node, b.c.device, b.c.ts))

    def bucket_coverage(self, run_id: str, start: float, end: float,
                        width_s: float) -> dict[tuple[str, str, str], float]:
        """Seconds the readings of each ``(node, device, metric)`` cover in the buckets that
        overlap ``[start, end)``, summed in one GROUP BY (the agents clip what a bucket
        covers to the run's planned window)."""
        b = S.chip_buckets
        stmt = (select(b.c.node, b.c.device, b.c.metric, func.sum(b.c.covered_s))
                .where(b.c.run_id == run_id, b.c.ts < end, b.c.ts + width_s > start)
                .group_by(b.c.node, b.c.device, b.c.metric))
        return {(n, d, m): float(s or 0.0) for n, d, m, s in self._read(stmt)}

    def bucket_totals(self, run_id: str, metric: str, start: float, end: float,
                      width_s: float) -> list[tuple[float, float, int]]:
        """Per bucket overlapping ``[start, end)``: ``(ts, covered seconds summed over
        devices, devices)`` of ``metric``'s rows, in one GROUP BY over the buckets."""
        b = S.chip_buckets
        stmt = (select(b.c.ts, func.sum(b.c.covered_s), func.count())
                .where(b.c.run_id == run_id, b.c.metric == metric, b.c.ts < end, b.c.ts + width_s > start)
                .group_by(b.c.ts).order_by(b.c.ts))
        return [(float(ts), float(c or 0.0), int(n)) for ts, c, n in self._read(stmt)]

