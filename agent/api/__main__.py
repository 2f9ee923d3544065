"""``python -m bbagent``: the command line."""
import sys

from bbagent.cli import run

sys.exit(run())
