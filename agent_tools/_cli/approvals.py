"""``agent-tools approve``: decide a session's pending tool approvals at the terminal, or from a script.

    agent-tools approve SESSION_ID                          # list the pending approvals
    agent-tools approve SESSION_ID APPROVAL_ID              # approve (shows the call and its digest first)
    agent-tools approve SESSION_ID APPROVAL_ID --deny --reason "not this account"
    agent-tools approve SESSION_ID APPROVAL_ID --digest 3f9c...   # only if the arguments are still these

:func:`prompt_and_decide` is the same decision for ``run`` and ``watch``, asked inline when a call waits.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import typer

from agent_tools._cli.running import run_or_explain
from agent_tools._errors import AnswerInputClosed, SessionError
from agent_tools.contracts._approvals import ApprovalRejected, PendingApproval


def describe(p: PendingApproval) -> str:
    who = f"  approvers: {', '.join(p.approvers)}\n" if p.approvers else ""
    until = f"  until: {p.deadline}\n" if p.deadline else ""
    return (
        f"{p.approval_id}  {p.tool}\n  arguments: {p.arguments_preview}\n  digest: {p.digest}\n{who}{until}"
    ).rstrip("\n")


async def prompt_and_decide(handle: Any, pending: PendingApproval) -> bool:
    """Ask at the terminal whether this call may run, and send the decision; False when the session refused
    it (decided elsewhere meanwhile, for example)."""
    from agent_tools._cli.human import read_line

    typer.secho(f"\nApproval needed: {pending.tool}", bold=True)
    typer.echo(describe(pending))
    try:
        while (answer := (await asyncio.to_thread(read_line, "Approve this call? [y/n]: ")).strip().lower()) not in (
            "y",
            "yes",
            "n",
            "no",
        ):
            typer.secho("  Please type y or n.", fg="red")
        approve = answer.startswith("y")
        reason = None if approve else (await asyncio.to_thread(read_line, "  Reason (for the model): ")).strip()
    except EOFError as exc:
        typer.echo("")
        raise AnswerInputClosed(
            f"No decision could be read: standard input is closed. Session {handle.id} is still waiting for it; "
            f"decide with `agent-tools approve {handle.id} {pending.approval_id} [--deny --reason ...]`."
        ) from exc
    try:
        await handle.decide_approval(
            pending.approval_id, approve=approve, digest=pending.digest, reason=reason or None, decided_by="cli"
        )
    except SessionError as exc:
        typer.secho(str(exc), fg="red", err=True)
        return False
    return True


async def _approve(
    session_id: str,
    approval_id: str | None,
    deny: bool,
    reason: str | None,
    digest: str | None,
    decided_by: str | None,
    by_signal: bool,
) -> int:
    from agent_tools._client import AgentToolsClient

    client = await AgentToolsClient.connect()
    try:
        handle = client.session(session_id)
        pending = await handle.pending_approvals()
        if approval_id is None:
            if not pending:
                typer.echo("No approvals are pending.")
                return 1
            for p in pending:
                typer.echo(describe(p))
            return 0
        found = next((p for p in pending if p.approval_id == approval_id), None)
        if digest is None:
            if found is None:
                typer.secho(f"Approval {approval_id!r} is not pending.", fg="red", err=True)
                return 1
            # The decision covers the arguments shown here: the session refuses it if they are not the call's.
            typer.echo(describe(found))
            digest = found.digest
        try:
            accepted = await handle.decide_approval(
                approval_id,
                approve=not deny,
                digest=digest,
                reason=reason,
                decided_by=decided_by,
                by_signal=by_signal,
            )
        except (SessionError, ApprovalRejected) as exc:
            typer.secho(str(exc), fg="red", err=True)
            return 1
        if accepted is None:
            typer.echo("Decision signalled (a bad one is recorded as rejected; see the approval_state query).")
        else:
            typer.echo(json.dumps(accepted.model_dump()))
        return 0
    finally:
        await client.close()


def register(app: typer.Typer) -> None:
    @app.command("approve")
    def approve(
        session_id: str = typer.Argument(..., help="The session whose tool call waits for approval"),
        approval_id: str | None = typer.Argument(None, help="The approval to decide (omit to list them)"),
        deny: bool = typer.Option(False, "--deny", help="Deny the call instead (the model gets the reason)"),
        reason: str | None = typer.Option(None, "--reason", help="Why (the model reads it on a denial)"),
        digest: str | None = typer.Option(None, "--digest", help="Decide only if the arguments have this digest"),
        decided_by: str | None = typer.Option(None, "--by", help="Who decides (checked against the approvers)"),
        signal: bool = typer.Option(False, "--signal", help="Send by signal instead of update"),
    ) -> None:
        """Approve or deny a tool call that waits for a person's approval, or list the pending ones."""
        if deny and not reason:
            typer.secho("--deny needs a --reason: the model reads it.", fg="red", err=True)
            raise typer.Exit(2)
        raise typer.Exit(run_or_explain(_approve(session_id, approval_id, deny, reason, digest, decided_by, signal)))
