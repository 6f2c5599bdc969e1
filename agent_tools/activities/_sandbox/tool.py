"""``exec_python``: run untrusted Python in a bubblewrap sandbox, or not at all.

The sandbox itself (namespaces, the minimal read-only root, the private ``/tmp``) is described in
:mod:`.isolation`; the program that runs inside it, applies the rlimits and lists the workspace is
:mod:`.launcher`; the engine a worker shares between calls, and the result the model reads, :mod:`.engine`.
This module is the tool, and the two places where an unavailable sandbox takes the tool away
(``prepare_session`` drops it from the agent's tools; a call that still reaches a worker without it gets a
tool error).

Fail closed: when bubblewrap is missing or cannot create its namespaces (no user namespaces, a container's
seccomp or AppArmor profile), ``exec_python`` is not offered, and the worker says why when it starts. Only
``AGENT_TOOLS_SANDBOX__UNSAFE_RUN_WITHOUT_ISOLATION=true``, on a worker that is not root, runs code without
isolation (a developer's laptop); every result then says ``"mode": "none"``.
"""

from __future__ import annotations

import logging

from agent_tools import _metrics as metrics
from agent_tools._activity_io import ToolCallOutput
from agent_tools.activities._context import BuiltinContext, ToolImpl
from agent_tools.activities._sandbox.engine import TOOL_NAME, UNSAFE_SETTING
from agent_tools.activities._services import Services
from agent_tools.contracts._sandbox import ExecPythonArgs

log = logging.getLogger(__name__)


async def offered(services: Services) -> bool:
    """Whether this worker may offer ``exec_python`` to an agent: only with a sandbox (or the opt-in)."""
    return (await services.sandbox.availability()).offered


async def announce(services: Services) -> None:
    """Say, when a worker starts, how it runs ``exec_python``, and why it does not offer it if it does not."""
    if services.catalog.get(TOOL_NAME) is None or TOOL_NAME in services.settings.disabled_tools:
        return
    found = await services.sandbox.availability()
    if found.sandbox is not None:
        sandbox = found.sandbox
        log.info(
            "%s runs code under bubblewrap (%s) as %s with %s", TOOL_NAME, sandbox.bwrap, sandbox.user_name,
            sandbox.runtime.executable,
        )  # fmt: skip
    elif found.unisolated is not None:
        log.warning(
            "%s RUNS MODEL-WRITTEN CODE WITHOUT ISOLATION on this worker, as %s with its network and files (%s=true): %s",
            TOOL_NAME, found.unisolated.user_name, UNSAFE_SETTING, found.reason,
        )  # fmt: skip
    else:
        log.warning("%s is not offered by this worker: %s", TOOL_NAME, found.reason)


async def exec_python(args: ExecPythonArgs, ctx: BuiltinContext) -> ToolCallOutput:
    result = await ctx.services.sandbox.run(args)
    metrics.sandbox_run(result.isolation.mode if result.isolation else "not_started", result.ok)
    # A failing script is an error result for the model (and is never spilled: its traceback matters).
    return ToolCallOutput(content=result.model_dump_json(exclude_none=True), is_error=not result.ok)


IMPLEMENTATIONS: dict[str, ToolImpl] = {TOOL_NAME: exec_python}
