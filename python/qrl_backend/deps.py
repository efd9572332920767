"""The optional dependencies of the reference backends (torch, transformers, safetensors): a check that
names the missing one and the extra that installs it, so a command answers in one line, not a traceback.
Not an installer: it never imports nor installs anything."""

from __future__ import annotations

import importlib.util
from typing import Sequence


class MissingDependency(Exception):
    """An optional package a command needs is not installed; the message names it and the pip extra."""


def require(modules: Sequence[str], extra: str) -> None:
    """Raises MissingDependency naming the first of `modules` that is not importable and the extra
    of qrl-sim-python that installs them (`pip install 'qrl-sim-python[EXTRA]'`)."""
    for name in modules:
        if importlib.util.find_spec(name) is None:
            raise MissingDependency(f"needs {name}, which is not installed: pip install 'qrl-sim-python[{extra}]' (or pip install {' '.join(modules)})")
