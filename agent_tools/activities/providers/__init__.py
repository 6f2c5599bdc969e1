"""Model providers: OpenAI-compatible chat completions, Anthropic messages, and the scripted model."""

from agent_tools.activities.providers.base import ModelRequest, ModelResponse, Provider, ToolSchema
from agent_tools.activities.providers.registry import ProviderRegistry

__all__ = ["ModelRequest", "ModelResponse", "Provider", "ProviderRegistry", "ToolSchema"]
