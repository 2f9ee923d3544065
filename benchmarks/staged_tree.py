"""The installed package as a folder of links to the source, for tools that find modules by walking
folders (import-linter, through grimp; mypy).

A wheel installs `agent/api/` as `bbagent`, `agent/` as `bbagent.agent`, `harness/` as
`bbagent.harness` and `prompts/` as `bbagent.agent.prompts` (pyproject's package-dir), so no folder
of the checkout is the package: a tool that walks `bbagent`'s folder finds only the public API. This
builds `DIR/bbagent/` with each installed module where its name says, every entry a symbolic link
into the checkout (edits show at once; a tool's messages name the checkout's file through it).

    python benchmarks/staged_tree.py DIR     # prints DIR; then PYTHONPATH=DIR lint-imports, mypy ...
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# installed package -> its folder in the checkout, parents before children (pyproject's package-dir)
PACKAGE_DIRS = (("bbagent", "agent/api"), ("bbagent/agent", "agent"), ("bbagent/harness", "harness"),
                ("bbagent/agent/prompts", "prompts"))


def stage(where: Path, root: Path = ROOT) -> Path:
    """``where/bbagent``, built again from links into ``root``; returns ``where``."""
    package = where / "bbagent"
    if package.exists():
        shutil.rmtree(package)
    mapped = {(root / folder).resolve() for _, folder in PACKAGE_DIRS}
    for installed, folder in PACKAGE_DIRS:
        target = where / installed
        target.mkdir(parents=True, exist_ok=True)
        for entry in sorted((root / folder).iterdir()):
            if entry.name == "__pycache__" or entry.resolve() in mapped:
                continue  # agent/api is bbagent itself, not bbagent.agent.api
            (target / entry.name).symlink_to(entry.resolve(), target_is_directory=entry.is_dir())
    return where


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    print(stage(Path(argv[0]).resolve()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
