"""Where the project's tools are: zestc and the runtime in the build
folder (ZEST_BUILD_DIR, else build/ in the project), the Python tools in
this virtualenv."""

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class LaunchError(Exception):
    """A failure the launcher reports as `zest: error: ...` and exit 1."""


def build_dir():
    return os.environ.get("ZEST_BUILD_DIR", os.path.join(ROOT, "build"))


def binary(name):
    """A tool of the build (zestc, zest-ckpt), which must exist."""
    path = os.path.join(build_dir(), "bin", name)
    if not os.access(path, os.X_OK):
        raise LaunchError(
            f"'{path}' not found: build the project first (make build), or "
            f"point ZEST_BUILD_DIR at its build folder"
        )
    return path


def python_tool(module, *args):
    """The command line running a Python module of the project with this
    interpreter (the project virtualenv's)."""
    return [sys.executable, "-m", module, *args]


def run(command, what, env=None):
    """Runs `command`, its output shown; a failure names `what` failed."""
    environment = dict(os.environ, **(env or {}))
    environment["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "python")]
        + [p for p in [os.environ.get("PYTHONPATH")] if p]
    )
    result = subprocess.run(command, env=environment)
    if result.returncode != 0:
        raise LaunchError(
            f"{what} failed (exit {result.returncode}): {' '.join(command)}"
        )


def mpirun():
    path = shutil.which("mpirun")
    if not path:
        raise LaunchError(
            "mpirun not found: install Open MPI (scripts/install-deps.sh)"
        )
    return path
