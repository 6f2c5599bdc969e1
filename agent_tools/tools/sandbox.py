"""codai's ``exec_python`` contract: run Python in a sandbox (the "code interpreter" capability).

The engine is :mod:`agent_tools.activities.sandbox`. Each call runs in a fresh process and a fresh temporary
working directory that is deleted afterwards: nothing persists between calls, so a retried or rescheduled
activity (possibly on another worker) behaves exactly like the first attempt. Files the model wants to work
on are passed in ``files``; files the code writes come back listed (small text files with their content).

Tool level ``l3_sandbox``: an agent needs that level (codai: "cloud sandbox: shell, Python, files").
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from agent_tools.catalog.spec import ToolLevel, ToolSpec

MAX_TIMEOUT_SECONDS = 120
MAX_CODE_CHARS = 100_000
MAX_INPUT_FILES = 20
MAX_INPUT_FILE_CHARS = 1_000_000

_SAFE_PATH = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.(?:/|$))[\w.\-/ ]{1,200}$")


class SandboxLimits(BaseModel):
    """Resource limits of one run; deployments may tighten or loosen them (defaults suit a code interpreter).

    Attributes:
        memory_mb: Address space (RLIMIT_AS) of the Python process.
        cpu_seconds_extra: CPU seconds allowed beyond the call's wall-clock timeout (RLIMIT_CPU is set to
            ``timeout + extra``; the wall clock normally fires first, the CPU limit backs it up).
        file_size_mb: Largest file the code may write (RLIMIT_FSIZE).
        disk_mb: Size of the private tmpfs holding the working directory and /tmp (as root).
        max_processes: Processes of the sandbox user (RLIMIT_NPROC; only applied when privileges are dropped).
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
    files: dict[str, str] = Field(
        default_factory=dict,
        description="Text files to create in the working directory first: relative path -> content",
    )

    @field_validator("files")
    @classmethod
    def _check_files(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_INPUT_FILES:
            raise ValueError(f"at most {MAX_INPUT_FILES} files")
        for path, content in value.items():
            if not _SAFE_PATH.match(path):
                raise ValueError(f"file path {path!r} must be relative, without '..'")
            if len(content) > MAX_INPUT_FILE_CHARS:
                raise ValueError(f"file {path!r} is larger than {MAX_INPUT_FILE_CHARS} characters")
        return value


ExecError = Literal["syntax_error", "exception", "timeout", "memory_limit", "cpu_limit", "killed", "sandbox_error"]


class SandboxFile(BaseModel):
    path: str = Field(description="Relative to the working directory")
    size_bytes: int
    text: str | None = Field(default=None, description="Content of a small UTF-8 file")
    text_truncated: bool = False


class Isolation(BaseModel):
    """What this run was actually isolated by (reported, never assumed)."""

    network: Literal["namespace", "none"] = Field(description="'namespace': no network at all, not even loopback")
    pid_namespace: bool = False
    private_tmp: bool = Field(default=False, description="Working directory and /tmp on a private, size-limited tmpfs")
    private_proc: bool = Field(default=False, description="/proc shows only the sandbox's own processes")
    hidden_paths: list[str] = Field(default_factory=list, description="Paths replaced by empty ones")
    user: str = Field(description="User the code ran as")
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
