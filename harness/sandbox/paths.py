"""Where the harness's own code lies, for both sides of the sandbox: the parent (the child's
PYTHONPATH) and the child (what its file view shows, which files the candidate may not touch).
Standard library only."""
from __future__ import annotations

import os

HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # harness/ (installed: bbagent/harness/)
PROJECT_ROOT = os.path.dirname(HARNESS_DIR)  # holds harness/: the checkout, or the installed bbagent/
