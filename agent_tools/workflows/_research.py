"""``DeepResearch``: plan several searches, read the best pages in parallel, write a cited report.

Started by the client API and ``POST /v1/research`` (workflow id ``research-<uuid>``), polled through the
``status`` query or awaited for its result. The time budget is enforced with the workflow clock: reading
stops when the budget minus the writer's reserve is spent, and the writer gets what is left.
"""

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from agent_tools._messages import Usage
from agent_tools.contracts._web.models import (
    ResearchCandidate,
    ResearchJob,
    ResearchPlan,
    ResearchPlanInput,
    ResearchReadInput,
    ResearchReadOutput,
    ResearchRequest,
    ResearchSearchInput,
    ResearchSearchOutput,
    ResearchSource,
    ResearchWriteInput,
    ResearchWriteOutput,
)
from agent_tools.contracts._web.urls import normalize_url

RETRY = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1), backoff_coefficient=2.0)
READ_RETRY = RetryPolicy(maximum_attempts=2, initial_interval=timedelta(seconds=1))


def pick_sources(results: list[ResearchSearchOutput], limit: int) -> list[ResearchCandidate]:
    """Round-robin over the searches by rank, de-duplicated: the top hit of every query before any second."""
    picked: list[ResearchCandidate] = []
    seen: set[str] = set()
    depth = max((len(r.candidates) for r in results), default=0)
    for rank in range(depth):
        for r in results:
            if rank < len(r.candidates):
                c = r.candidates[rank]
                key = normalize_url(c.url)
                if key not in seen:
                    seen.add(key)
                    picked.append(c)
                    if len(picked) >= limit:
                        return picked
    return picked


@workflow.defn(name="DeepResearch", sandboxed=False)
class DeepResearch:
    def __init__(self) -> None:
        self.job = ResearchJob(id="", status="running", phase="starting")

    @workflow.query(name="status")
    def status(self) -> ResearchJob:
        return self.job

    def _phase(self, phase: str) -> None:
        """Record the phase and show it in the Temporal UI's current details."""
        self.job.phase = phase
        lines = [f"**deep_research** — {phase}", "", f"Question: {self.job.question[:300]}"]
        if self.job.searches:
            lines += ["", "Searches:", *[f"- {q}" for q in self.job.searches]]
        if self.job.sources:
            lines += ["", "Sources:", *[f"- [S{src.n}] {src.url}" for src in self.job.sources]]
        workflow.set_current_details("\n".join(lines))

    @workflow.run
    async def run(self, request: ResearchRequest) -> ResearchJob:
        started = workflow.now()
        deadline = started + timedelta(seconds=request.time_budget_s)
        self.job = ResearchJob(
            id=workflow.info().workflow_id, status="running", question=request.question, phase="planning"
        )
        self._phase("planning")
        # The writer needs a share of the budget; reading stops in time to leave it.
        write_reserve = timedelta(seconds=max(15.0, request.time_budget_s * 0.35))

        def remaining(reserve: timedelta = timedelta(0)) -> float:
            return max(5.0, (deadline - reserve - workflow.now()).total_seconds())

        try:
            plan = await workflow.execute_activity(
                "agent_tools.research.plan",
                ResearchPlanInput(question=request.question),
                result_type=ResearchPlan,
                start_to_close_timeout=timedelta(seconds=min(60.0, remaining(write_reserve))),
                retry_policy=RETRY,
                summary=f"plan: {request.question[:60]}",
            )
            self.job.searches = plan.queries
            self._spent(plan.usage)
            self._phase("searching")
            searches = await asyncio.gather(
                *[
                    workflow.execute_activity(
                        "agent_tools.research.search",
                        ResearchSearchInput(
                            query=q,
                            include_domains=request.include_domains,
                            published_after=request.published_after,
                        ),
                        result_type=ResearchSearchOutput,
                        start_to_close_timeout=timedelta(seconds=min(30.0, remaining(write_reserve))),
                        retry_policy=RETRY,
                        summary=f'search: "{q[:70]}"',
                    )
                    for q in plan.queries
                ]
            )
            candidates = pick_sources(list(searches), request.max_sources)
            if not candidates:
                errors = "; ".join(s.error for s in searches if s.error) or "no results"
                raise ApplicationError(f"no sources found ({errors})", type="NoSources", non_retryable=True)
            self._phase("reading")
            read_timeout = timedelta(seconds=min(30.0, remaining(write_reserve)))
            reads = await asyncio.gather(*[self._read(c, read_timeout) for c in candidates])
            sources: list[ResearchSource] = []
            for c, r in zip(candidates, reads, strict=True):
                if r.ok:
                    sources.append(
                        ResearchSource(
                            n=len(sources) + 1,
                            title=r.title or c.title,
                            url=c.url,
                            published_at=r.published_at or c.published_at,
                        )
                    )
            if not sources:
                raise ApplicationError("none of the found pages could be read", type="NoSources", non_retryable=True)
            self.job.sources = sources
            self._phase("writing")
            written = await workflow.execute_activity(
                "agent_tools.research.write",
                ResearchWriteInput(question=request.question, sources=sources, output_schema=request.output_schema),
                result_type=ResearchWriteOutput,
                start_to_close_timeout=timedelta(seconds=max(30.0, remaining())),
                retry_policy=RETRY,
                summary=f"write report from {len(sources)} sources",
            )
        except (ActivityError, ApplicationError) as exc:
            cause = exc.cause if isinstance(exc, ActivityError) and exc.cause is not None else exc
            if (
                isinstance(cause, ApplicationError)
                and cause.type in ("SchemaMismatch", "CitationMismatch")
                and cause.details
            ):
                self._spent(Usage.model_validate(cause.details[0]))  # the writer's failed attempts
            self.job.status = "failed"
            self._phase("failed")
            self.job.error = str(cause)
            self.job.took_ms = int((workflow.now() - started).total_seconds() * 1000)
            return self.job
        self._spent(written.usage)
        self.job.report = written.report
        self.job.answer = written.answer
        self.job.status = "completed"
        self._phase("done")
        self.job.took_ms = int((workflow.now() - started).total_seconds() * 1000)
        return self.job

    def _spent(self, used: Usage | None) -> None:
        if used is not None:
            self.job.usage = self.job.usage + used

    async def _read(self, c: ResearchCandidate, timeout: timedelta) -> ResearchReadOutput:
        try:
            out: ResearchReadOutput = await workflow.execute_activity(
                "agent_tools.research.read",
                ResearchReadInput(url=c.url, title=c.title),
                result_type=ResearchReadOutput,
                start_to_close_timeout=timeout,
                retry_policy=READ_RETRY,
                summary=f"read: {c.url[:80]}",
            )
            return out
        except ActivityError as exc:
            return ResearchReadOutput(url=c.url, ok=False, error=str(exc.cause or exc))
