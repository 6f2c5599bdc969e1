"""``exec_python``'s engine: the tool (:mod:`.tool`), re-exported here for the tool registry."""

from agent_tools.activities.sandbox.tool import (
    IMPLEMENTATIONS,
    SandboxEngine,
    SandboxSettings,
    deployment_secrets,
    run_python,
)

__all__ = ["IMPLEMENTATIONS", "SandboxEngine", "SandboxSettings", "deployment_secrets", "run_python"]
