"""``agent-tools events send`` (publish an event to the ingress) and ``agent-tools serve`` (run the ingress).

agent-tools serve --port 8080
agent-tools events send github.check_suite.completed --payload '{"pr": 420}' --token $TOKEN
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

events_app = typer.Typer(help="Events: publish to the ingress that wakes sessions waiting in wait_for_event.")


@events_app.command("send")
def send(
    kind: Annotated[str, typer.Argument(help="Event kind, e.g. github.check_suite.completed")],
    payload: Annotated[str, typer.Option("--payload", "-p", help="JSON object")] = "{}",
    organisation: Annotated[str | None, typer.Option(help="Defaults to the token's organisation")] = None,
    project: Annotated[str | None, typer.Option(help="Defaults to the token's project")] = None,
    delivery_id: Annotated[str | None, typer.Option("--id", help="Delivery id: a resend with it is a no-op")] = None,
    url: Annotated[str | None, typer.Option(help="Ingress base URL [env AGENT_TOOLS_EVENTS__INGRESS_URL]")] = None,
    token: Annotated[str | None, typer.Option(help="Project token [env AGENT_TOOLS_EVENTS__TOKEN]")] = None,
) -> None:
    """POST one event to /v1/events and print the ingress's answer."""
    import httpx

    from agent_tools._settings import Settings

    cfg = Settings().events
    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise typer.BadParameter(f"--payload is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise typer.BadParameter("--payload must be a JSON object")
    body: dict[str, Any] = {"kind": kind, "payload": data}
    for key, value in (("organisation", organisation), ("project", project), ("id", delivery_id)):
        if value is not None:
            body[key] = value
    headers = {}
    bearer = token or cfg.token
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    base = (url or cfg.ingress_url).rstrip("/")
    try:
        resp = httpx.post(f"{base}/v1/events", json=body, headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        typer.echo(f"could not reach the ingress at {base}: {exc}", err=True)
        raise typer.Exit(2) from None
    if resp.status_code >= 400:
        try:
            detail = resp.json().get("detail", resp.text)
        except ValueError:
            detail = resp.text
        typer.echo(f"refused ({resp.status_code}): {detail}", err=True)
        raise typer.Exit(1)
    typer.echo(json.dumps(resp.json(), indent=2))


def serve(
    host: Annotated[str | None, typer.Option(help="[env AGENT_TOOLS_EVENTS__HOST]")] = None,
    port: Annotated[int | None, typer.Option(help="[env AGENT_TOOLS_EVENTS__PORT]")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level")] = "info",
) -> None:
    """Run the HTTP service (event ingress and webhooks, plus the other mounted routes) with uvicorn."""
    import uvicorn

    from agent_tools._service.app import create_app
    from agent_tools._settings import Settings

    settings = Settings()
    cfg = settings.events
    uvicorn.run(
        create_app(settings, warm=True),
        host=host or cfg.host,
        port=port or cfg.port,
        log_level=log_level,
        proxy_headers=True,
    )


def register(app: typer.Typer) -> None:
    app.add_typer(events_app, name="events")
    app.command("serve")(serve)
