"""Model providers: OpenAI-compatible chat completions, Anthropic messages, and the scripted model.

The names load lazily: importing one provider module (``base``, say) loads none of the others, and a worker
loads a provider when a session first uses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_tools._lazy import lazy_names

__all__ = ["ModelProvider", "ModelRequest", "ModelResponse", "Provider", "ProviderRegistry", "ToolSchema"]

_LAZY = {
    "ModelProvider": "agent_tools.activities._providers.base",
    "ModelRequest": "agent_tools.activities._providers.base",
    "ModelResponse": "agent_tools.activities._providers.base",
    "Provider": "agent_tools.activities._providers.base",
    "ToolSchema": "agent_tools.activities._providers.base",
    "ProviderRegistry": "agent_tools.activities._providers.registry",
}

if TYPE_CHECKING:
    from agent_tools.activities._providers.base import ModelProvider, ModelRequest, ModelResponse, Provider, ToolSchema
    from agent_tools.activities._providers.registry import ProviderRegistry

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
