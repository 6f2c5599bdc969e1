"""Run by a root worker in front of bwrap when a path the sandbox binds sits where the sandbox account
cannot reach it (a venv or a pyenv under ``/root`` or a 0700 home).

``python -I -S stage.py UID GID STAGE N SRC... -- BWRAP ARGS...``, as root: in a mount namespace of its
own (private, so nothing propagates to the host) it mounts a tmpfs on ``STAGE`` (an empty directory the
account can reach) and bind-mounts each ``SRC`` on ``STAGE/<i>``; then it drops to ``UID``/``GID`` (no
supplementary groups, every id set) and execs bwrap, which binds ``STAGE/<i>`` where the code expects the
path. The account never reaches the private directories above the paths; what is in them still answers by
its own modes. Any failure exits with status 126 and one line on stderr, and bwrap is not started.

Standard library only: it runs before anything of the project is importable, with ``-S``.
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18


def _fail(message: str) -> None:
    sys.stderr.write(f"exec_python staging: {message}\n")
    sys.exit(126)


def _call(libc: ctypes.CDLL, name: str, *args: object) -> None:
    if getattr(libc, name)(*args) != 0:
        errno = ctypes.get_errno()
        _fail(f"{name}{tuple(a.decode() if isinstance(a, bytes) else a for a in args)}: {os.strerror(errno)}")


def main(argv: list[str]) -> None:
    if "--" not in argv:
        _fail("usage: stage.py UID GID STAGE N SRC... -- BWRAP ARGS...")
    head, command = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    uid, gid, stage, count = int(head[0]), int(head[1]), head[2], int(head[3])
    sources = head[4 : 4 + count]
    if uid == 0 or gid == 0 or len(sources) != count or not command:
        _fail("refused: the account must not be root, and every source and the command must be given")
    libc = ctypes.CDLL(None, use_errno=True)
    _call(libc, "unshare", CLONE_NEWNS)
    _call(libc, "mount", None, b"/", None, MS_REC | MS_PRIVATE, None)
    _call(libc, "mount", b"tmpfs", stage.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755,size=1m")
    for i, source in enumerate(sources):
        target = os.path.join(stage, str(i))
        if os.path.isdir(source):
            os.mkdir(target, 0o755)
        else:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        _call(libc, "mount", source.encode(), target.encode(), None, MS_BIND | MS_REC, None)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() == 0 or os.geteuid() == 0 or os.getgroups():
        _fail("refused: the privileges were not dropped")
    os.execv(command[0], command)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (OSError, ValueError, IndexError) as exc:
        _fail(f"{type(exc).__name__}: {exc}")
