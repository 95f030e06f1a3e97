"""A run's own rows in the store: the run itself, its events, its steps and its findings.

``RunStore`` is a part of ``soak.store.Store``: what the daemon records of a run besides the
samples (start, status and verdict; lifecycle events; the workloads' aggregated steps; the
analysis' findings) and how a reader gets them back as records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import and_, delete, func, insert, select, update
from sqlalchemy.engine import Connection

from soak.errors import StoreError, masked
from soak.store import schema as S
from soak.store.engine import Database
from soak.store.records import (
    FINDING_KEYS,
    RUN_STATUSES,
    EventRecord,
    FindingRecord,
    RunRecord,
)


class RunStore(Database):
    """Runs, events, steps and findings (a base of ``Store``)."""

    # ------------------------------------------------------------------ writing
    def create_run(
        self,
        run_id: str,
        *,
        host: str,
        plan: Mapping[str, Any],
        started_ts: float,
        planned_end_ts: float | None = None,
        manifest: Mapping[str, Any] | None = None,
        workload: str | None = None,
        backend: str | None = None,
        time_scale: float = 1.0,
        run_dir: str | None = None,
    ) -> None:
        if self.get_run(run_id) is not None:
            raise StoreError(f"run {run_id} already exists in {self.url}")
        self._write(
            insert(S.runs).values(
                id=run_id,
                host=host,
                workload=workload,
                backend=backend,
                plan=json.dumps(plan, default=str),
                manifest=None if manifest is None else json.dumps(manifest, default=str),
                started_ts=started_ts,
                planned_end_ts=planned_end_ts,
                status="running",
                time_scale=time_scale,
                restarts=0,
                run_dir=run_dir,
            )
        )

    def update_run(self, run_id: str, **values: Any) -> None:
        """Change run columns (status, restarts, manifest, verdict, ...)."""
        if "manifest" in values and values["manifest"] is not None:
            values["manifest"] = json.dumps(values["manifest"], default=str)
        if "plan" in values:
            values["plan"] = json.dumps(values["plan"], default=str)
        self._write(update(S.runs).where(S.runs.c.id == run_id).values(**values))

    def finish_run(
        self, run_id: str, *, status: str, ended_ts: float, verdict: str | None = None
    ) -> bool:
        """The end and verdict of a run on one host; False (nothing written) for a cluster
        run, whose end only the holder of its judging lease writes (``finish_cluster_run``)."""
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {RUN_STATUSES}")
        r = S.runs
        res = self._write(update(r).where(r.c.id == run_id, r.c.nodes <= 1)
                          .values(status=status, ended_ts=ended_ts, verdict=verdict))
        return bool(res.rowcount)

    def add_steps(self, run_id: str, rows: Iterable[Mapping[str, Any]], node: str | None = None) -> None:
        """Aggregated step rows (keys as the ``steps`` table; run_id and node are filled in)."""
        cols = [c for c in S.steps.c.keys() if c != "id"]
        out = [{**{k: r.get(k) for k in cols}, "run_id": run_id, "node": r.get("node") or node} for r in rows]
        if not out:
            return

        def write(conn: Connection, by_copy: bool) -> None:
            if by_copy:
                self._copy(conn, S.steps, cols, [tuple(r[c] for c in cols) for r in out])
            else:
                conn.execute(insert(S.steps), out)

        self._retry_copy(write, alone=True)

    def add_event(
        self,
        run_id: str,
        kind: str,
        *,
        ts: float,
        end_ts: float | None = None,
        workload: str | None = None,
        rank: int | None = None,
        message: str | None = None,
        detail: Mapping[str, Any] | None = None,
        node: str | None = None,
    ) -> None:
        if kind not in S.EVENT_KINDS:
            raise ValueError(f"event kind {kind!r} is not one of {S.EVENT_KINDS}")
        self._write(
            insert(S.events).values(
                run_id=run_id,
                ts=ts,
                end_ts=end_ts,
                kind=kind,
                workload=workload,
                rank=rank,
                message=message,
                detail=json.dumps(dict(detail or {}), default=str),
                node=node,
            )
        )

    def replace_findings(self, run_id: str, findings: Iterable[Mapping[str, Any]], *, node: str | None = None,
                         kinds: Sequence[str] | None = None) -> int:
        """Replace the run's findings with ``findings`` (analysis dicts), atomically.

        ``node`` and ``kinds`` narrow what is replaced: a cluster node agent replaces its own
        chips' findings (``node``, the single-chip kinds), the leader the peer comparison's
        (``kinds``), neither touching the other's."""
        rows = []
        for f in findings:
            rows.append(
                {
                    "run_id": run_id,
                    "kind": str(f["kind"]),
                    "device": None if f.get("device") is None else str(f.get("device")),
                    "metric": f.get("metric"),
                    "start_ts": f.get("start"),
                    "end_ts": f.get("end"),
                    "severity": f.get("severity"),
                    "summary": f.get("summary"),
                    "detail": json.dumps(
                        {k: v for k, v in f.items() if k not in FINDING_KEYS and k != "node"}, default=str
                    ),
                    # a node agent's own findings name no node: they are its node's
                    "node": f.get("node") or node,
                }
            )

        f = S.findings
        scope = [f.c.run_id == run_id]
        if node is not None:
            scope.append(f.c.node == node)
        if kinds is not None:
            scope.append(f.c.kind.in_(list(kinds)))

        def replace(conn: Connection) -> None:
            conn.execute(delete(f).where(*scope))
            if rows:
                conn.execute(insert(S.findings), rows)

        self._retry(replace)
        return len(rows)

    # ------------------------------------------------------------------ reading
    @staticmethod
    def _run_record(row: Any) -> RunRecord:
        m = row._mapping
        return RunRecord(
            id=m["id"],
            host=m["host"],
            workload=m["workload"],
            backend=m["backend"],
            # masked on reading too: a run recorded before soak masked its plan keeps the
            # password in its row, and every report of it would carry it
            plan=masked(json.loads(m["plan"])) if m["plan"] else {},
            manifest=json.loads(m["manifest"]) if m["manifest"] else None,
            started_ts=m["started_ts"],
            planned_end_ts=m["planned_end_ts"],
            ended_ts=m["ended_ts"],
            status=m["status"],
            verdict=m["verdict"],
            time_scale=m["time_scale"],
            restarts=m["restarts"] or 0,
            run_dir=m["run_dir"],
            nodes=m["nodes"] or 1,
            generation=m["generation"] or 0,
            plan_digest=m["plan_digest"],
            leader=m["leader"],
            lease_until=m["lease_until"],
            rendezvous=m["rendezvous"],
        )

    def list_runs(self) -> list[RunRecord]:
        """All runs, newest first."""
        rows = self._read(select(S.runs).order_by(S.runs.c.started_ts.desc(), S.runs.c.id))
        return [self._run_record(r) for r in rows]

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._read(select(S.runs).where(S.runs.c.id == run_id))
        return self._run_record(rows[0]) if rows else None

    def heartbeat_marks(self, run_id: str, event_kinds: Iterable[str], node: str | None = None,
                        ) -> dict[tuple[str, int], tuple[float | None, float | None]]:
        """Per (workload, rank): the ``ts`` of the last step row and of the last event of
        ``event_kinds`` stored from its heartbeats (of ``node`` in a cluster run); where a
        resumed daemon reads on."""
        st, ev = S.steps, S.events
        marks: dict[tuple[str, int], list[float | None]] = {}
        steps = (select(st.c.workload, st.c.rank, func.max(st.c.ts))
                 .where(st.c.run_id == run_id, *([st.c.node == node] if node is not None else []))
                 .group_by(st.c.workload, st.c.rank))
        for wl, rank, ts in self._read(steps):
            marks.setdefault((wl, int(rank)), [None, None])[0] = ts
        events = (select(ev.c.workload, ev.c.rank, func.max(ev.c.ts))
                  .where(ev.c.run_id == run_id, ev.c.kind.in_(list(event_kinds)), ev.c.workload.is_not(None),
                         ev.c.rank.is_not(None), *([ev.c.node == node] if node is not None else []))
                  .group_by(ev.c.workload, ev.c.rank))
        for wl, rank, ts in self._read(events):
            marks.setdefault((wl, int(rank)), [None, None])[1] = ts
        return {k: (v[0], v[1]) for k, v in marks.items()}

    def load_steps(self, run_id: str, rank: int | None = None) -> list[dict[str, Any]]:
        t = S.steps
        where = [t.c.run_id == run_id]
        if rank is not None:
            where.append(t.c.rank == rank)
        stmt = select(t).where(and_(*where)).order_by(t.c.workload, t.c.rank, t.c.ts)
        return [
            {k: v for k, v in r._mapping.items() if k not in ("id", "run_id")}
            for r in self._read(stmt)
        ]

    def load_events(self, run_id: str, kind: str | None = None, *, last: int | None = None) -> list[EventRecord]:
        """The run's events in time order; ``last``: only the latest so many (a running agent
        reads the last link test every few seconds, not all of them)."""
        t = S.events
        where = [t.c.run_id == run_id]
        if kind is not None:
            where.append(t.c.kind == kind)
        stmt = select(t).where(and_(*where)).order_by(t.c.ts, t.c.id)
        if last is not None:
            latest = select(t).where(and_(*where)).order_by(t.c.ts.desc(), t.c.id.desc()).limit(last).subquery()
            stmt = select(latest).order_by(latest.c.ts, latest.c.id)
        return [
            EventRecord(
                ts=r.ts,
                kind=r.kind,
                end_ts=r.end_ts,
                workload=r.workload,
                rank=r.rank,
                message=r.message,
                detail=json.loads(r.detail) if r.detail else {},
                node=r.node,
            )
            for r in self._read(stmt)
        ]

    def device_fault_events(self, kinds: tuple[str, ...] = ("device_fault",)) -> list[tuple[str, EventRecord]]:
        """Every run's events of ``kinds`` (by default the chips' own fault reports, the
        ``device_fault`` events), as (run id, event), in time order: what ``soak nodes`` reads
        of each chip across runs."""
        t = S.events
        stmt = select(t).where(t.c.kind.in_(kinds)).order_by(t.c.ts, t.c.id)
        return [(r.run_id, EventRecord(ts=r.ts, kind=r.kind, end_ts=r.end_ts, workload=r.workload, rank=r.rank,
                                       message=r.message, detail=json.loads(r.detail) if r.detail else {}, node=r.node))
                for r in self._read(stmt)]

    def load_findings(self, run_id: str) -> list[FindingRecord]:
        t = S.findings
        stmt = select(t).where(t.c.run_id == run_id).order_by(t.c.start_ts, t.c.id)
        return [
            FindingRecord(
                kind=r.kind,
                device=r.device,
                metric=r.metric,
                start=r.start_ts,
                end=r.end_ts,
                severity=r.severity,
                summary=r.summary,
                detail=json.loads(r.detail) if r.detail else {},
                node=r.node,
            )
            for r in self._read(stmt)
        ]
