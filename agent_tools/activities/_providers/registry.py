"""Model specs (``openai:gpt-4.1-mini``, ``anthropic:...``, ``scripted:path``, ``<endpoint>:model``) to
providers.

Each provider's module is imported when a spec first names it: a worker on OpenAI never loads the scripted
model's script parser, a scripted test never loads the HTTP providers.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from agent_tools._errors import ConfigurationError
from agent_tools._model_spec import split_spec
from agent_tools._settings import Settings
from agent_tools.activities._providers.base import Provider

if TYPE_CHECKING:
    import httpx

    from agent_tools.activities._providers.scripted import ScriptedProvider


def _scripted(path: str) -> ScriptedProvider:
    from agent_tools.activities._providers.scripted import ScriptedProvider

    return ScriptedProvider(path)


def _http_provider(
    kind: str, client: httpx.AsyncClient, *, base_url: str, api_key: str | None, name: str | None = None,
    stream: bool = True,
) -> Provider:  # fmt: skip
    """An ``anthropic`` (messages) provider over ``client``; any other ``kind`` speaks OpenAI's chat
    completions."""
    if kind == "anthropic":
        from agent_tools.activities._providers.anthropic import AnthropicProvider

        return AnthropicProvider(client, base_url=base_url, api_key=api_key, name=name, stream=stream)
    from agent_tools.activities._providers.openai_compat import OpenAIProvider

    return OpenAIProvider(client, base_url=base_url, api_key=api_key, name=name, stream=stream)


class ProviderRegistry:
    """The worker's default model provider: one provider per prefix over a shared HTTP client (whose own
    retries stay off: Temporal's retry policy is the only one)."""

    def __init__(self, settings: Settings, client: httpx.AsyncClient) -> None:
        self.settings = settings
        self.client = client
        self._cache: dict[str, Provider] = {}

    def resolve(self, spec: str) -> tuple[Provider, str]:
        prefix, model = split_spec(spec)
        if prefix == "scripted":
            return _scripted(model), model
        if prefix not in self._cache:
            self._cache[prefix] = self._build(prefix)
        return self._cache[prefix], model

    def check(self, spec: str) -> None:
        check_spec(spec, self.settings)

    def _build(self, prefix: str) -> Provider:
        s = self.settings
        if prefix in s.providers:
            ep = s.providers[prefix]
            return _http_provider(
                ep.kind, self.client, base_url=ep.base_url, api_key=ep.api_key, name=prefix, stream=ep.stream
            )
        if prefix == "openai":
            key = s.openai_api_key or os.environ.get("OPENAI_API_KEY")
            return _http_provider("openai", self.client, base_url=s.openai_base_url, api_key=key)
        if prefix == "anthropic":
            key = s.anthropic_api_key or os.environ.get("ANTHROPIC_API_KEY")
            return _http_provider("anthropic", self.client, base_url=s.anthropic_base_url, api_key=key)
        if prefix == "ollama":
            return _http_provider(
                "openai", self.client, base_url="http://localhost:11434/v1", api_key=None, name="ollama"
            )
        raise unknown_provider(prefix, s)


BUILTIN_PREFIXES = ("openai", "anthropic", "ollama", "scripted")


def unknown_provider(prefix: str, settings: Settings) -> ConfigurationError:
    return ConfigurationError(
        f"unknown model provider {prefix!r}: use openai, anthropic, scripted, ollama or an endpoint "
        f"configured in settings.providers ({sorted(settings.providers)})"
    )


def check_spec(spec: str, settings: Settings) -> None:
    """Refuse a model spec that no call could use, before a session starts on it (no network).

    Raises:
        ConfigurationError: the spec's form, its provider or its script file is wrong.
    """
    prefix, model = split_spec(spec)
    if prefix == "scripted":
        _scripted(model)
    elif prefix not in settings.providers and prefix not in BUILTIN_PREFIXES:
        raise unknown_provider(prefix, settings)
