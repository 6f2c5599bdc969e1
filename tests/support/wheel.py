"""Build this distribution's wheel from a source tree and install it, not editable, in a fresh virtualenv:
what the host-app test and the cross-version test run the package from."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def copy_sources(source: Path, target: Path) -> Path:
    """The tree a wheel is built from, without what a build leaves behind: setuptools keeps a build/ folder in
    the tree it builds, and files it left there by an earlier build (of an older layout) would be packed."""
    shutil.copytree(
        source, target, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", "tests")
    )
    return target


def export_commit(commit: str, target: Path) -> Path:
    """The files of ``commit`` of this repository, as ``git archive`` gives them."""
    target.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit], check=True, capture_output=True, timeout=120
    )
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True, timeout=120)
    return target


def build_dists(source: Path, out: Path) -> tuple[Path, Path]:
    """The sdist and wheel of ``source``, built as a release is (``python -m build``). No build isolation:
    setuptools is in the test environment, and nothing may download here."""
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (sdist,) = out.glob("durable_agent_tools-*.tar.gz")
    (wheel,) = out.glob("durable_agent_tools-*.whl")
    return sdist, wheel


def build_wheel(source: Path, out: Path) -> Path:
    """The wheel of ``source`` (built beside its sdist)."""
    return build_dists(source, out)[1]


def venv_with(wheel: Path, home: Path) -> Path:
    """A fresh virtualenv at ``home`` with ``wheel`` installed, not editable; returns ``home``.

    Its dependencies come from the test environment's site-packages through a ``.pth`` path line (pip would
    otherwise download them all again); a path line does not run that directory's own ``.pth`` files, so
    the test environment's editable install of this checkout stays invisible.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True, timeout=120)
    python = home / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return home
