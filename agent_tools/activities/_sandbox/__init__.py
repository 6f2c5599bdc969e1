"""``exec_python``'s engine: the tool (:mod:`.tool`), its bubblewrap sandbox (:mod:`.isolation`) and the
program that runs inside it (:mod:`.launcher`)."""

from agent_tools.activities._sandbox.tool import (
    IMPLEMENTATIONS,
    SandboxEngine,
    announce,
    offered,
    protected_paths,
)

__all__ = ["IMPLEMENTATIONS", "SandboxEngine", "announce", "offered", "protected_paths"]
