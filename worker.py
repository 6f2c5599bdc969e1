"""Composition root script: ``python worker.py`` runs a worker against the Temporal server of TEMPORAL_*
(or a profile, or AGENT_TOOLS_TEMPORAL_ADDRESS).

The same as ``agent-tools worker``; everything it composes lives in :mod:`agent_tools._worker`.
"""

from __future__ import annotations

import asyncio
import logging

from agent_tools._process_exit import run_and_exit
from agent_tools._worker import main

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    run_and_exit(lambda: asyncio.run(main()))
