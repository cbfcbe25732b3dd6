"""How a run ended: one typed value, written by the conductor's methods, read by ``finalize``.

The conductor (llmload/locust/conductor.py) is the only writer: the plugin, the web UI hooks, the
signal handlers and the live view call its methods (``begin``, ``interrupt``, ``stop_from_ui``,
``lose_worker``, ...) and never set these fields themselves. ``llmload.results.finish.finalize`` reads it,
with the resolved run and the merged figures, to judge the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from llmload.load.plan import PlanStep
from llmload.schema.results_model import LostWorker, SelfTest, Step


@dataclass
class RunOutcome:
    started_at: float  # wall time the run was built (the test's start, once it starts)
    run_t0: float | None = None  # wall time the first plan step started
    ended_at: float | None = None
    stop_reason: str | None = None  # "plan complete", a stop condition, a signal's name, the web UI
    interrupted: str | None = None  # the signal that stopped the run (SIGINT / SIGTERM)
    plan_complete: bool = False  # every step of the plan ran (its drain may still be interrupted)
    late_signal: str | None = None  # a signal after the load ended, while the results were written
    cut_why: str = ""  # why open streams were cut (stop_grace ran out, a second signal, the web UI)
    quit_early: bool = False  # the process quit mid-plan with no signal, no Stop, no stop condition
    results_error: str | None = None  # the results disk failed (full): what the directory holds
    not_ready: str | None = None  # distributed: why the workers could not start (nothing was sent)
    reasons: list[str] = field(default_factory=list)  # said in summary.json's run.reasons
    lost_workers: list[LostWorker] = field(default_factory=list)
    # target -> requests the live workers sent and had not reported when the drain gave up (drain.py)
    unreported: dict[str, int] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)  # one per plan step entered
    selftest: SelfTest | None = None  # the capacity self-test before the load (llmload/client/selftest.py)

    def lost(self, worker: str) -> bool:
        return any(w.worker == worker for w in self.lost_workers)

    def to_json(self) -> dict[str, Any]:
        """As JSON data (aggregate.json), for ``from_json``: a shard's ending, read back by ``llmload merge``."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["lost_workers"] = [w.model_dump() for w in self.lost_workers]
        out["steps"] = [st.model_dump() for st in self.steps]
        out["selftest"] = self.selftest.model_dump() if self.selftest is not None else None
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunOutcome:
        known = {f.name for f in fields(cls)}
        o = cls(**{k: v for k, v in d.items() if k in known})
        o.lost_workers = [LostWorker.model_validate(w) for w in d.get("lost_workers", [])]
        o.steps = [Step.model_validate(st) for st in d.get("steps", [])]
        o.selftest = SelfTest.model_validate(d["selftest"]) if d.get("selftest") else None
        return o


def step_entered(ps: PlanStep, start: float) -> Step:
    """The record of a plan step entered at ``start`` (its end is set when the next one begins)."""
    st = ps.step
    users = None if st.open_loop else st.users
    return Step(
        phase=st.phase,
        level=st.level,
        targets=list(ps.targets),
        start=start,
        end=None,
        target_rate=st.rate,
        users=users,
        planned_s=st.planned_s,
    )
