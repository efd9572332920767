"""Serve python/examples/numpy_estimators.py (numpy TIS + PPO) to `qrl-sim check`; used by the
example of `qrl-sim check --help`. Resolves symlinks, so it works from a linked docs/ too."""

import os
import sys

repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
sys.path.insert(0, os.path.join(repo, "python", "examples"))
sys.path.insert(0, os.path.join(repo, "python"))

import numpy_estimators  # noqa: E402
import qrl_golden  # noqa: E402

qrl_golden.serve(estimate=numpy_estimators.estimate)
