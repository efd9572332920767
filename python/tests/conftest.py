"""pytest setup for qrl_golden's own tests: the package on sys.path and the golden plugin."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

pytest_plugins = ["qrl_golden.pytest_plugin"]
