"""``python -m bbagent``: the command line."""
import sys

from bbagent.cli import main

sys.exit(main())
