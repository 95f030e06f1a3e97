"""The run's final analysis, on the agent that judges it: the verdict, the findings and the
end on the run row, and the saved analysis the report reads (``report/analysis.json``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from soak import runfolder as layout
from soak.daemon.membership import Membership
from soak.daemon.started import StartedRun
from soak.errors import UserError
from soak.judge import Judgement, judge_run

log = logging.getLogger("soak.daemon")


@dataclass(frozen=True)
class Final:
    """What the final analysis left."""

    judged: Judgement | None  # None: the store held no data, or the analysis failed
    verdict: str | None
    findings: list[dict[str, Any]] | None  # None: the analysis failed before it found any
    recorded: bool = True  # False: another agent holds the right to judge the run (nothing written)


def judge_final(run: StartedRun, membership: Membership, *, status: str, why: str | None,
                ended_ts: float) -> Final:
    """Judge the ended run and record its end, where this agent still may (``membership``:
    a cluster run's judging lease). A bug in the analysis still ends the run (a failed run
    fails, another has no verdict); a store that fails raises."""
    findings: list[dict[str, Any]] | None = None
    try:
        judged = judge_run(run.store, run.run_id, plan=run.plan, profile=run.profile, status=status,
                           why=why, ended=ended_ts)
        findings = [] if judged is None else judged.findings
        verdict = None if judged is None else judged.verdict
    except UserError:
        raise
    except Exception:
        log.exception("final analysis")
        judged, verdict = None, ("fail" if status == "failed" else None)
    # judging a large cluster takes tens of seconds: the lease is renewed (or found taken)
    # before anything of the verdict is written
    if not membership.judges():
        return Final(judged, verdict, findings, recorded=False)
    if findings is not None:
        run.store.replace_findings(run.run_id, findings)
    if not membership.finish(run, status=status, ended_ts=ended_ts, verdict=verdict):
        return Final(judged, verdict, findings, recorded=False)
    run.store.checkpoint_wal()
    if judged is not None:
        try:
            layout.write_analysis(run.run_dir, judged.to_dict())
        except OSError as exc:  # the report judges the run from the store instead
            log.error("could not save the final analysis in %s: %s", run.run_dir, exc.strerror or exc)
    return Final(judged, verdict, findings)
