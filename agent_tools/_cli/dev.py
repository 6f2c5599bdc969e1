"""``dev`` (embedded server + UI + worker) and ``worker`` (a worker against a running server)."""

from __future__ import annotations

import asyncio
import contextlib

import typer

from agent_tools._cli.running import log_file, other_terminals, run_or_explain
from agent_tools._settings import Settings


def register(app: typer.Typer) -> None:
    @app.command()
    def dev(
        port: int = typer.Option(7233, help="Temporal frontend port"),
        ui_port: int = typer.Option(8233, help="Temporal UI port"),
    ) -> None:
        """Embedded Temporal dev server with UI, plus a worker, until Ctrl-C."""

        async def go() -> None:
            from agent_tools._embedded import embedded

            settings = Settings()
            async with embedded(
                settings, port=port, ui_port=ui_port, log_file=log_file(), exit_on_cancel=True
            ) as client:
                ours = client.settings
                typer.echo(f"Temporal at {ours.temporal_address}; UI at {ours.temporal_ui_url}")
                typer.echo(f"worker on task queue {ours.task_queue}, logging to {log_file()}; Ctrl-C to stop")
                # Commands in other terminals read these; without them they look for 7233 and link to 8233.
                typer.echo(other_terminals(ours))
                await asyncio.Event().wait()

        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(go())

    @app.command()
    def worker(
        health: str | None = typer.Option(
            None, "--health", metavar="HOST:PORT", help="Serve /healthz and /readyz here (AGENT_TOOLS_HEALTH_BIND)"
        ),
    ) -> None:
        """Run a worker against the Temporal server of TEMPORAL_* (or a profile) or AGENT_TOOLS_TEMPORAL_ADDRESS."""
        import logging

        from agent_tools._worker import main

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        settings = Settings(health_bind=health) if health else Settings()
        with contextlib.suppress(KeyboardInterrupt):
            run_or_explain(main(settings))

    @app.command()
    def migrate() -> None:
        """Create the store at AGENT_TOOLS_DATABASE_URL, or bring its schema to this version (workers do it too)."""

        async def go() -> str:
            from agent_tools._store.db import Store

            settings = Settings()
            store = Store(settings.database_url)
            try:
                return await store.create_schema()
            finally:
                await store.close()

        done = run_or_explain(go())
        typer.echo(f"store {done}: {Settings().database_url}")
