"""pytest setup for the python/ tests (qrl_backend and qrl_golden): the packages on sys.path and the golden plugin."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

pytest_plugins = ["qrl_golden.pytest_plugin"]
