"""``agent-tools tools``: the built-in tools, and how an agent gets each (FYAI's "Automatic" chip)."""

from __future__ import annotations

import typer

from agent_tools._catalog import PROFILES, ToolCatalog


def how_offered(catalog: ToolCatalog, name: str, profile: str | None) -> str:
    """``automatic`` (attached under its condition), ``profile`` (in the profile's list) or ``assign``."""
    if catalog.is_automatic(name, profile):
        return "automatic"
    if profile is not None and name in PROFILES.get(profile, []):
        return "profile"
    return "assign"


def register(app: typer.Typer) -> None:
    @app.command("tools")
    def tools(
        profile: str | None = typer.Option(None, "--profile", "-p", help="rtc, fyai, codai, all or none"),
    ) -> None:
        """List the built-in tools: capability, tool level, and how an agent of PROFILE gets each."""
        if profile is not None and profile not in PROFILES:
            raise typer.BadParameter(f"unknown profile {profile!r}; known: {sorted(PROFILES)}")
        catalog = ToolCatalog.builtin()
        names = (
            catalog.names()
            if profile is None
            else [*PROFILES[profile], *(n for n in catalog.names() if n not in PROFILES[profile])]
        )
        width = max(len(n) for n in names)
        for name in names:
            spec = catalog.get(name)
            assert spec is not None  # names come from the catalog
            typer.echo(
                f"{name:<{width}}  {spec.capability:<10}  {spec.level.value:<10}  {how_offered(catalog, name, profile)}"
            )
