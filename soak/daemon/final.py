"""The run's final analysis, on the agent that judges it: the verdict, the findings and the
end on the run row, and the saved analysis the report reads (``report/analysis.json``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from soak import runfolder as layout
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


def judge_final(run: StartedRun, *, status: str, why: str | None, ended_ts: float) -> Final:
    """Judge the ended run and record its end. A bug in the analysis still ends the run
    (a failed run fails, another has no verdict); a store that fails raises."""
    findings: list[dict[str, Any]] | None = None
    try:
        judged = judge_run(run.store, run.run_id, plan=run.plan, profile=run.profile, status=status,
                           why=why, ended=ended_ts)
        findings = [] if judged is None else judged.findings
        verdict = None if judged is None else judged.verdict
        run.store.replace_findings(run.run_id, findings)
    except UserError:
        raise
    except Exception:
        log.exception("final analysis")
        judged, verdict = None, ("fail" if status == "failed" else None)
    run.store.finish_run(run.run_id, status=status, ended_ts=ended_ts, verdict=verdict)
    run.store.checkpoint_wal()
    if judged is not None:
        try:
            layout.write_analysis(run.run_dir, judged.to_dict())
        except OSError as exc:  # the report judges the run from the store instead
            log.error("could not save the final analysis in %s: %s", run.run_dir, exc.strerror or exc)
    return Final(judged, verdict, findings)
