"""Leave a process that used a Temporal client without finalizing the interpreter.

The Temporal core runtime's threads can still call into Python while the interpreter finalizes, which
aborts the process ("Fatal Python error: PyGILState_Release ... finalizing", exit status 134) after all
its work is done (temporalio/sdk-python#300). A short-lived command that exits 134 at random breaks the
user's scripts, so commands and scripts end through :func:`run_and_exit`: output is flushed, then the
process leaves with its real exit status and skips finalization.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn


def exit_status(code: object) -> int:
    """The status ``sys.exit(code)`` would give: None is 0, an int is itself, anything else is printed
    to stderr and gives 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def core_runtime_started() -> bool:
    """Whether this process started the Temporal core runtime (a client or a worker), whose threads are what
    can abort finalization. Unknown (a changed SDK) counts as started."""
    runtime = sys.modules.get("temporalio.runtime")
    if runtime is None:
        return False
    ref = getattr(runtime, "_runtime_ref", None)
    return ref is None or getattr(ref, "_default_runtime", True) is not None


def exit_now(status: int) -> NoReturn:
    """Leave with ``status``: a normal exit when no Temporal core runtime runs (finalizers, atexit hooks and
    SQLite's last checkpoint run as usual), else flush and leave at once, skipping finalization."""
    if not core_runtime_started():
        sys.exit(status)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`agent-tools sessions | head`): nothing left to say
            pass
    os._exit(status)


def run_and_exit(main: Callable[[], object]) -> NoReturn:
    """Run ``main`` and leave with the status it asked for (``sys.exit``), 130 on Ctrl-C, or 1 with the
    traceback printed on an uncaught exception: what a normal exit would give, minus finalization."""
    try:
        main()
    except SystemExit as exc:
        exit_now(exit_status(exc.code))
    except KeyboardInterrupt:
        exit_now(130)
    except BaseException:
        traceback.print_exc()
        exit_now(1)
    exit_now(0)
