"""Web commands: ``agent-tools web search``, ``web fetch`` (run in this process, no worker needed) and
``web research`` (a DeepResearch job on the workers)."""

from __future__ import annotations

import json
from typing import Any, NoReturn

import typer

from agent_tools._cli.running import run_or_explain
from agent_tools._settings import Settings

web_app = typer.Typer(help="Web search, page fetching and deep research.", no_args_is_help=True)


@web_app.command("search")
def search(
    query: str = typer.Argument(..., help="The query; operators like site: pass through"),
    max_results: int = typer.Option(5, "--max-results", "-n", min=1, max=10),
    include: list[str] = typer.Option([], "--include", help="Only these hosts (repeatable)"),
    freshness: str | None = typer.Option(None, help="day, week, month or year"),
    as_json: bool = typer.Option(False, "--json", help="Print the /v1/tools/search response body"),
) -> None:
    """Search the web with the configured engines (failover, cache) and print [S1].. lines."""
    from agent_tools.contracts._web.models import SearchHit
    from agent_tools.contracts._web.render import render_search

    request: dict[str, Any] = {"query": query, "max_results": max_results, "include_domains": include or None}
    if freshness:
        request["freshness"] = freshness
    res = _run_tool("search", request)
    if as_json:
        typer.echo(res.model_dump_json(indent=2))
        return
    hits = [
        SearchHit(title=r.title, url=r.url, snippet=r.snippet, source=r.source, published_at=r.published_at)
        for r in res.results
    ]
    typer.echo(render_search(query, hits, engines_tried=res.sources_tried, engines_failed=[], cached=res.cached))
    for d in res.degraded:
        typer.secho(f"degraded: {d}", fg="yellow", err=True)


@web_app.command("fetch")
def fetch(
    url: str = typer.Argument(...),
    focus: str | None = typer.Option(None, help="Return only the paragraphs that best match this"),
    max_chars: int = typer.Option(8000, min=200, max=40_000),
    text: bool = typer.Option(False, "--text", help="Plain text instead of Markdown"),
    as_json: bool = typer.Option(False, "--json", help="Print the /v1/tools/fetch response body"),
) -> None:
    """Fetch one page through the SSRF guard and print its main content as Markdown."""
    request = {"url": url, "focus": focus, "max_chars": max_chars, "format": "text" if text else "markdown"}
    page = _run_tool("fetch", request)
    if as_json:
        typer.echo(page.model_dump_json(indent=2))
        return
    typer.secho(
        f"{page.title or page.final_url}  ({page.chars} chars{', truncated' if page.truncated else ''})",
        bold=True,
        err=True,
    )
    typer.echo(page.content)


@web_app.command("research")
def research(
    question: str = typer.Argument(...),
    max_sources: int = typer.Option(12, min=3, max=30),
    time_budget: int = typer.Option(90, "--time-budget", min=20, max=300),
    wait: bool = typer.Option(True, help="Wait for the report (else print the job id)"),
) -> None:
    """Start a deep_research job on the workers; print the report and its sources."""
    from agent_tools._client import AgentToolsClient

    async def go() -> Any:
        client = await AgentToolsClient.connect(Settings())
        job = await client.research.create(
            {"question": question, "max_sources": max_sources, "time_budget_s": time_budget}
        )
        if not wait:
            return job
        return await client.research.wait(job.id, timeout_s=time_budget + 60)

    job = run_or_explain(go())
    if job.status != "completed":
        typer.echo(json.dumps(job.model_dump(), indent=2, default=str))
        raise typer.Exit(0 if job.status == "running" else 1)
    typer.echo(job.report if job.report is not None else json.dumps(job.answer, indent=2, ensure_ascii=False))


def _run_tool(name: str, request: dict[str, Any]) -> Any:
    """Run ``ToolsClient.<name>(request)`` in this process; a refusal is printed with its code and exits 1."""
    from agent_tools._web_client import ToolsClient, WebToolError

    async def go() -> Any:
        async with ToolsClient(settings=Settings()) as tools:
            try:
                return await getattr(tools, name)(request)
            except WebToolError as exc:
                return exc  # printed with its code and details, not as a bare error line

    result = run_or_explain(go())
    if isinstance(result, WebToolError):
        _print_refusal(result)
    return result


def _print_refusal(exc: Exception) -> NoReturn:
    # The web tools' error shape, "ERROR code: message" (the exception's text already starts with the code).
    typer.secho(f"ERROR {exc}", fg="red", err=True)
    raise typer.Exit(1) from exc


def register(app: typer.Typer) -> None:
    app.add_typer(web_app, name="web")
