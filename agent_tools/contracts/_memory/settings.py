"""The memory section of the settings: retention, the context block and the embeddings endpoint.

Apart from the tools' models so that loading the settings does not build them.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

MAX_RECALL = 10
MAX_EMBEDDING_DIMENSIONS = 4096


class EmbeddingsEndpoint(BaseModel):
    """An OpenAI-compatible embeddings endpoint (``POST {base_url}/embeddings``), set like a model provider.

    Environment: ``AGENT_TOOLS_MEMORY__EMBEDDINGS__BASE_URL``, ``..._MODEL``, ``..._API_KEY`` (or the whole
    object as JSON in ``AGENT_TOOLS_MEMORY__EMBEDDINGS``)."""

    base_url: str = Field(description="e.g. https://api.openai.com/v1, http://localhost:11434/v1 (Ollama)")
    model: str = Field(min_length=1, max_length=200, description="e.g. text-embedding-3-small")
    api_key: str | None = None
    dimensions: int | None = Field(
        default=None, ge=1, le=MAX_EMBEDDING_DIMENSIONS, description="asked of models that can shorten vectors"
    )
    timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    # Below this cosine a neighbour is not a match: without a floor every search would return the nearest
    # memories however unrelated. 0.3 suits OpenAI's text-embedding-3 and MiniLM-style models.
    min_similarity: float = Field(default=0.3, ge=-1.0, le=1.0)


class MemoryPolicy(BaseModel):
    """Retention and retrieval settings: the ``memory`` section of :class:`agent_tools.Settings`
    (``settings.memory``; environment ``AGENT_TOOLS_MEMORY__WORKING_TTL_DAYS`` and so on)."""

    working_ttl_days: float = Field(default=14.0, gt=0, description="working memories unused this long expire")
    long_term_ttl_days: float | None = Field(default=None, gt=0, description="None keeps long-term memories")
    promote_after_uses: int = Field(default=3, ge=1, description="uses (saves + recalls) that make it long-term")
    context_limit: int = Field(default=8, ge=0, le=MAX_RECALL, description="memories in the Memory Context block")
    embeddings: EmbeddingsEndpoint | None = Field(
        default=None, description="semantic recall; without it recall is full-text only"
    )
    vector_cache_mb: int = Field(
        default=256,
        ge=0,
        le=1_048_576,
        description="each worker's in-memory copy of scopes' vectors, MiB for all scopes together; a scope "
        "larger than this is searched from the store instead, slower (0: always from the store)",
    )
