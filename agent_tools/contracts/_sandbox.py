"""codai's ``exec_python`` contract: run Python in a sandbox (the "code interpreter" capability).

The engine is :mod:`agent_tools.activities._sandbox`. Each call runs in a fresh sandbox with a fresh, empty
workspace that is gone afterwards: nothing persists between calls, so a retried or rescheduled activity
(possibly on another worker) behaves exactly like the first attempt. Files the model wants to work on are
passed in ``files``; files the code writes come back listed (small text files with their content).

The arguments are checked here, where they enter: code and file contents must be text that
encodes as UTF-8 (no lone surrogates), code has no NUL (Python source cannot), and file paths are relative
names without ``.``/``..`` segments, NUL or surrogates, none of them both a file and another's directory.
A bad argument is a tool error for the model, never a failed activity.

Tool level ``l3_sandbox``: an agent needs that level (codai: "cloud sandbox: shell, Python, files").
"""

from __future__ import annotations

import re
import sys
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator

from agent_tools._boundaries import MAX_TOOL_ARGUMENTS_BYTES, limit
from agent_tools._catalog.spec import ToolLevel, ToolSpec

MAX_TIMEOUT_SECONDS = 120
MAX_CODE_CHARS = 100_000
MAX_INPUT_FILES = 20
# Well inside the cap on one call's arguments (MAX_TOOL_ARGUMENTS_BYTES, 256 KB encoded): the schema used
# to promise 20 files of 1,000,000 characters, which no call could carry (the model's call was refused first).
MAX_INPUT_FILE_CHARS = 200_000
MAX_INPUT_CHARS_TOTAL = MAX_TOOL_ARGUMENTS_BYTES

MAX_PATH_CHARS = 200
# One path segment: word characters, dots, dashes and spaces; never "." or ".." (checked apart).
_SEGMENT = re.compile(r"[\w.\- ]+")


def _first_surrogate(text: str) -> int | None:
    """Offset of the first lone surrogate (text that cannot be encoded as UTF-8), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _path_problem(path: str) -> str | None:
    if not 1 <= len(path) <= MAX_PATH_CHARS:
        return f"must be 1 to {MAX_PATH_CHARS} characters"
    segments = path.split("/")
    if any(s in ("", ".", "..") for s in segments):
        return "must be relative, without empty, '.' or '..' segments"
    if not all(_SEGMENT.fullmatch(s) for s in segments):
        return "may hold letters, digits, '_', '.', '-', ' ' and '/' only"
    return None


class SandboxLimits(BaseModel):
    """Resource limits of one run; deployments may tighten or loosen them (defaults suit a code interpreter).

    Attributes:
        memory_mb: Address space (RLIMIT_AS) of the Python process.
        cpu_seconds_extra: CPU seconds allowed beyond the call's wall-clock timeout (RLIMIT_CPU is set to
            ``timeout + extra``; the wall clock normally fires first, the CPU limit backs it up).
        file_size_mb: Largest file the code may write (RLIMIT_FSIZE).
        disk_mb: Size of the sandbox's /tmp, a private tmpfs that is its working directory and the only place
            it can write.
        max_processes: Processes of one run (RLIMIT_NPROC, which under bubblewrap counts the run's own user
            namespace only; not applied in the unisolated mode, where it would count all the user's).
        open_files: RLIMIT_NOFILE.
        output_chars: Characters kept of stdout and of stderr each.
        returned_files: How many files of the working directory are listed in the result.
        returned_file_chars: Text returned per small text file, and in total ``4 *`` that.
    """

    memory_mb: int = 512
    cpu_seconds_extra: int = 5
    file_size_mb: int = 64
    disk_mb: int = 256
    max_processes: int = 64
    open_files: int = 256
    output_chars: int = 20_000
    returned_files: int = 50
    returned_file_chars: int = 4_000


class ExecPythonArgs(BaseModel):
    code: str = Field(
        min_length=1,
        max_length=MAX_CODE_CHARS,
        description="Python 3 source to run as a script. Print what you want to see.",
    )
    timeout_seconds: int = Field(
        default=30, ge=1, le=MAX_TIMEOUT_SECONDS, description="Wall-clock limit, 1-120 seconds (default 30)"
    )
    files: dict[str, Annotated[str, Field(**limit(chars=MAX_INPUT_FILE_CHARS))]] = Field(
        default_factory=dict,
        max_length=MAX_INPUT_FILES,
        description=(
            f"Text files to create in the working directory first: relative path (at most {MAX_PATH_CHARS} "
            f"characters, no '..') -> content (at most {MAX_INPUT_FILE_CHARS} characters), up to {MAX_INPUT_FILES} files "
            f"and {MAX_INPUT_CHARS_TOTAL} characters in all (a call's arguments are at most 256 KB)"
        ),
    )

    @field_validator("code")
    @classmethod
    def _check_code(cls, value: str) -> str:
        # A lone surrogate never gets here: pydantic refuses it in a plain string (it does not in dict values,
        # hence the check of the files' contents below).
        if "\x00" in value:
            raise ValueError(f"code contains a NUL character at offset {value.index(chr(0))}; Python source cannot")
        return value

    @field_validator("files")
    @classmethod
    def _check_files(cls, value: dict[str, str]) -> dict[str, str]:
        total = sum(len(content) for content in value.values())
        if total > MAX_INPUT_CHARS_TOTAL:
            raise ValueError(
                f"files hold {total} characters together, more than {MAX_INPUT_CHARS_TOTAL}: pass less, or have the "
                "code fetch or generate the data"
            )
        for path, content in value.items():
            problem = _path_problem(path)
            if problem:
                raise ValueError(f"file path {path!r} {problem}")
            if len(content) > MAX_INPUT_FILE_CHARS:
                raise ValueError(f"file {path!r} is larger than {MAX_INPUT_FILE_CHARS} characters")
            bad = _first_surrogate(content)
            if bad is not None:
                raise ValueError(f"file {path!r} contains a lone surrogate at offset {bad}: send valid Unicode text")
        for path in value:
            for other in value:
                if other.startswith(path + "/"):
                    raise ValueError(f"file path {path!r} is also the directory of {other!r}")
        return value


ExecError = Literal["syntax_error", "exception", "timeout", "memory_limit", "cpu_limit", "killed", "sandbox_error"]


class SandboxFile(BaseModel):
    path: str = Field(description="Relative to the working directory")
    size_bytes: int
    text: str | None = Field(default=None, description="Content of a small UTF-8 file")
    text_truncated: bool = False


class Isolation(BaseModel):
    """What this run was isolated by: stated by the worker from what it set up, never taken from the code."""

    mode: Literal["bubblewrap", "none"] = Field(
        description="'bubblewrap': the sandbox; 'none': the unisolated developer mode, no isolation at all"
    )
    network: Literal["none", "host"] = Field(description="'none': no network at all, not even loopback")
    filesystem: Literal["minimal_root", "host"] = Field(
        description="'minimal_root': a read-only root with the Python runtime and libraries only"
    )
    pid_namespace: bool = Field(description="The code sees and can signal its own processes only")
    proc: Literal["own", "none", "host"] = Field(description="What /proc shows: the sandbox's processes, nothing, all")
    private_tmp: bool = Field(description="The working directory is /tmp, a private, size-limited tmpfs")
    user: str = Field(description="Account the code ran as")
    resource_limits: bool = True
    environment: Literal["scrubbed"] = "scrubbed"


class ExecPythonResult(BaseModel):
    ok: bool = Field(description="True when the script exited with status 0")
    exit_code: int | None = Field(description="Exit status; negative: killed by that signal; null: not started")
    error: ExecError | None = None
    error_message: str | None = None
    stdout: str
    stderr: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: int
    files: list[SandboxFile] = Field(default_factory=list, description="Files in the working directory after the run")
    files_truncated: bool = False
    isolation: Isolation | None = None


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="exec_python",
        description=(
            "Run Python 3 in a sandbox (code interpreter) and get stdout, stderr and the exit status. Each call "
            "starts fresh: a new process in an empty temporary working directory with no network access, "
            "512 MB of memory and a wall-clock timeout (timeout_seconds, default 30, at most 120). Nothing "
            "persists between calls: pass input data in `files` (relative path -> text) or in the code; files "
            "the code writes are listed in the result (small text files with their content). Output over "
            "20,000 characters per stream is truncated. Installed packages may be imported; nothing can be "
            "installed."
        ),
        args_model=ExecPythonArgs,
        result_model=ExecPythonResult,
        capability="sandbox",
        level=ToolLevel.l3_sandbox,
        summary_arg="code",
    ),
]


class SandboxSettings(BaseModel):
    """The sandbox section of :class:`agent_tools.Settings` (``settings.sandbox``; environment
    ``AGENT_TOOLS_SANDBOX__BWRAP`` and so on)."""

    bwrap: str = Field(default="bwrap", description="The bubblewrap executable: a path, or a name looked up in PATH")
    python: str = Field(
        default=sys.executable, description="Interpreter for the code; the worker's own by default (same packages)"
    )
    python_fallbacks: list[str] = Field(
        default=["/usr/local/bin/python3", "/usr/bin/python3"],
        description=(
            "Interpreters tried in order when `python` does not work in the sandbox (a root worker's pyenv under "
            "/root, which the sandbox account cannot read); one with library paths must be the worker's version"
        ),
    )
    user: str | None = Field(
        default="nobody",
        description="Account bwrap runs as when the worker is root (never root itself: RLIMIT_NPROC does not bind it)",
    )
    library_paths: list[str] | None = Field(
        default=None,
        description="Directories of packages the code may import, bound read-only; None: the worker's site-packages",
    )
    read_only_paths: list[str] = Field(
        default_factory=list, description="More host paths shown read-only in the sandbox (data sets, /usr/share/...)"
    )
    mount_proc: bool = Field(
        default=True,
        description=(
            "Give the sandbox a /proc of its own PID namespace; off: no /proc at all (a container that masks parts "
            "of its /proc, Docker's default, cannot mount a new one)"
        ),
    )
    unsafe_run_without_isolation: bool = Field(
        default=False,
        description=(
            "DANGER, for a developer's laptop only: when bubblewrap cannot run, run model-written code as the "
            "worker's own user with its network and files (never on a root worker)"
        ),
    )
    limits: SandboxLimits = SandboxLimits()
