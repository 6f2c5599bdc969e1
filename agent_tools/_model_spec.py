"""Model specs: ``provider:model`` (``openai:gpt-4.1-mini``, ``scripted:path``, ``<endpoint>:model``).

Pure. Which providers a worker has, their endpoints and their keys are in the worker's settings, not the
client's: a client checks only a spec's form, and the worker refuses a spec it cannot serve when the
session is prepared, with the reason.
"""

from __future__ import annotations

from agent_tools._errors import ConfigurationError


def split_spec(spec: str) -> tuple[str, str]:
    """The provider prefix and the model name of ``spec``.

    Raises:
        ConfigurationError: ``spec`` is not of the form ``provider:model``.
    """
    prefix, sep, model = spec.partition(":")
    if not sep or not prefix or not model:
        raise ConfigurationError(f"model spec {spec!r} must look like 'provider:model'")
    return prefix, model
