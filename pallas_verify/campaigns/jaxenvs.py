"""Python environments of JAX releases: where the version matrix (``campaigns.versions``)
runs each release.

The environment of a release is, the first found first:

1. the one given with ``--jax-env VERSION=PATH`` (a Python executable, or a venv folder);
2. this interpreter, when the jax installed here is that release;
3. ``.venvs/jax-VERSION`` under the current folder (the project's Makefile builds these:
   ``make .venvs/jax-0.11.2/.installed``);
4. ``pallas-verify/venvs/jax-VERSION`` under the user's cache folder (``$XDG_CACHE_HOME``,
   default ``~/.cache``), made on first use: a venv of this interpreter
   (``python -m venv``), then ``pip install jax==VERSION jaxlib==VERSION`` with
   pallas-verify itself (``-e`` the source checkout this package was imported from, else
   the installed release from the package index); ``.installed`` marks it complete.

Each environment is probed before it runs anything: ``import jax, pallas_verify.cli`` must
work there and its jax must be the release asked for (``probe``).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pallas_verify.errors import InvalidArgument
from pallas_verify.reports.report import running_jax_version

__all__ = ["SUPPORTED", "JaxEnv", "NoEnvironment", "cache_root", "create_env", "find_env", "parse_envs", "parse_releases",
           "probe", "release_key", "self_requirement"]

Origin = Literal["--jax-env", "this interpreter", ".venvs", "cache"]
_RELEASE = re.compile(r"\d+(\.\d+)+")
_TAIL = 8  # lines of a failed command's output an error keeps
_PROBE = "import jax, pallas_verify.cli; print(jax.__version__)"


class NoEnvironment(RuntimeError):
    """A release's environment cannot be made or cannot run pallas-verify; the message says
    why (the failed command and its output's last lines) and the fix."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class JaxEnv:
    """Where one JAX release runs.

    Attributes:
      version: the JAX release.
      python: its interpreter (a venv's ``bin/python`` is kept as given, not resolved: the
        link is what makes it the venv's).
      origin: how it was found (the list in the module's docstring).
    """

    version: str
    python: str
    origin: Origin


def release_key(version: str) -> tuple[int, ...]:
    """``(0, 12, 0, 1)`` for ``0.12.0.1``: releases sort by it."""
    return tuple(int(part) for part in version.split("."))


#: The JAX releases pallas-verify supports, as pyproject.toml's dependency says (a test
#: holds the two equal): the lowest, and the first it does not.
SUPPORTED = ((0, 10), (0, 13))


def _release(text: str, option: str) -> str:
    if not _RELEASE.fullmatch(text):
        raise InvalidArgument(f"{option} {text!r} is not a JAX release number; write e.g. 0.11.2 or 0.12.0.1.")
    low, high = SUPPORTED
    if not low <= release_key(text) < high:
        raise InvalidArgument(f"{option} {text!r} is not a JAX release pallas-verify supports: it runs on "
                              f"jax>={'.'.join(map(str, low))},<{'.'.join(map(str, high))}; give a release in that range, e.g. "
                              "0.11.2 (docs/jax-versions.md).")
    return text


def parse_releases(text: str) -> tuple[str, ...]:
    """``--jax 0.12.0.1,0.11.2``: the releases, each once, oldest first."""
    releases = {_release(v.strip(), "--jax") for v in text.split(",") if v.strip()}
    if not releases:
        raise InvalidArgument(f"--jax {text!r} names no JAX release; write e.g. --jax 0.11.2,0.12.0.1.")
    return tuple(sorted(releases, key=release_key))


def parse_envs(items: Sequence[str], *, cwd: Path) -> dict[str, Path]:
    """``--jax-env VERSION=PATH`` (repeatable): each release's Python executable; PATH may be
    a venv folder (its ``bin/python``), relative to ``cwd``."""
    envs: dict[str, Path] = {}
    for item in items:
        version, sep, where = item.partition("=")
        if not sep or not where:
            raise InvalidArgument(f"--jax-env {item!r} is not VERSION=PATH; write e.g. "
                                  "--jax-env 0.11.2=.venvs/jax-0.11.2 (a venv folder or a Python executable).")
        path = cwd / where if not Path(where).is_absolute() else Path(where)
        python = path / "bin" / "python" if path.is_dir() else path
        if not python.is_file() or not os.access(python, os.X_OK):
            raise InvalidArgument(f"--jax-env {item!r}: {str(path)!r} is neither a Python executable nor a venv "
                                  "folder holding bin/python; give one with jax and pallas-verify installed.")
        envs[_release(version.strip(), "--jax-env")] = python
    return envs


def cache_root(environ: Mapping[str, str] = os.environ) -> Path:
    """Where made environments live: ``$XDG_CACHE_HOME/pallas-verify/venvs`` (default
    ``~/.cache/pallas-verify/venvs``)."""
    from pallas_verify._env import user_cache_dir

    return user_cache_dir(environ) / "venvs"


def find_env(version: str, given: Mapping[str, Path], *, cwd: Path, cache: Path,
             say: Callable[[str], Any] = print) -> JaxEnv:
    """The environment of ``version`` (the order of the module's docstring), made in
    ``cache`` when none is found; NoEnvironment when making it fails."""
    if version in given:
        return JaxEnv(version=version, python=str(given[version]), origin="--jax-env")
    if running_jax_version() == version:
        return JaxEnv(version=version, python=sys.executable, origin="this interpreter")
    local = cwd / ".venvs" / f"jax-{version}" / "bin" / "python"
    if local.is_file():
        return JaxEnv(version=version, python=str(local), origin=".venvs")
    folder = cache / f"jax-{version}"
    if not (folder / ".installed").is_file():
        create_env(version, folder, say)
    return JaxEnv(version=version, python=str(folder / "bin" / "python"), origin="cache")


def self_requirement() -> list[str]:
    """pip's arguments that install this pallas-verify: ``-e`` its source checkout (a
    ``pyproject.toml`` beside the package), else this release from the package index."""
    root = Path(__file__).resolve().parents[2]  # pallas_verify/campaigns/jaxenvs.py
    if (root / "pyproject.toml").is_file():
        return ["-e", str(root)]
    return [f"pallas-verify=={importlib.metadata.version('pallas-verify')}"]


def create_env(version: str, folder: Path, say: Callable[[str], Any] = print) -> Path:
    """Make the environment of ``version`` at ``folder`` (a half-made one is cleared first),
    saying each command; its Python. NoEnvironment naming the release, the command and
    its output's last lines when a step fails."""
    python = folder / "bin" / "python"
    steps = [[sys.executable, "-m", "venv", "--clear", str(folder)],
             [str(python), "-m", "pip", "install", "--quiet", f"jax=={version}", f"jaxlib=={version}",
              *self_requirement()]]
    say(f"jax {version}: making its environment in {folder}")
    for command in steps:
        say(f"jax {version}: {shlex.join(command)}")
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            raise NoEnvironment(f"making the environment of jax {version} failed: {shlex.join(command)} exited "
                                f"{done.returncode}:\n{_tail(done.stderr or done.stdout)}\n"
                                f"fix it, or give one: --jax-env {version}=PATH")
    (folder / ".installed").write_text(f"jax=={version}\n")
    return python


def probe(env: JaxEnv, *, cwd: Path) -> str:
    """The jax release pallas-verify runs on in ``env``; NoEnvironment when it cannot be
    imported there, or runs another release than ``env.version``."""
    try:
        done = subprocess.run([env.python, "-c", _PROBE], capture_output=True, text=True, cwd=cwd, timeout=300,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NoEnvironment(f"{env.python} cannot run `{_PROBE}`: {exc}") from None
    if done.returncode:
        raise NoEnvironment(f"`import pallas_verify` fails under {env.python} ({env.origin}; exit {done.returncode}):"
                            f"\n{_tail(done.stderr)}")
    seen = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "?"
    if seen != env.version:
        raise NoEnvironment(f"{env.python} ({env.origin}) runs jax {seen}, not {env.version}; give "
                            f"--jax-env {env.version}=PATH, a Python or venv with jax {env.version}.")
    return seen


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(f"  {line}" for line in lines[-_TAIL:]) or "  (no output)"
