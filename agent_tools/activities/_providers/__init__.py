"""Model providers: OpenAI-compatible chat completions, Anthropic messages, and the scripted model."""

from agent_tools.activities._providers.base import ModelProvider, ModelRequest, ModelResponse, Provider, ToolSchema
from agent_tools.activities._providers.registry import ProviderRegistry

__all__ = ["ModelProvider", "ModelRequest", "ModelResponse", "Provider", "ProviderRegistry", "ToolSchema"]
