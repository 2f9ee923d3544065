"""The README's quick start, run as written: each command of its "Quick start" section (past the
set-up, which CI has done) in a fresh folder whose `.venv` is this environment, through the
console script, with the demo's recorded model. The last step must serve torch's relu on the
approved kernel."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def quick_start_commands() -> list[str]:
    section = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = []
    for line in section.splitlines():
        command = line[4:] if line.startswith("    ") else ""
        command = command.removeprefix("bash .ci/setup && ")  # the set-up CI has run
        if command.startswith(".venv/bin/") and "pytest" not in command:
            commands.append(command)
    return commands


def test_the_quick_start_runs_as_written(tmp_path):
    commands = quick_start_commands()
    assert [c.split()[0] for c in commands] == [".venv/bin/bbagent"] * 4 + [".venv/bin/python"]
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # the environment, not the interpreter it links to
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BBAGENT_", "TRITON_INTERPRET"))}
    if not (tmp_path / ".venv" / "bin" / "bbagent").exists():  # an environment without the console script
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "bbagent").write_text(f"#!/bin/sh\nexec {sys.executable} -m bbagent \"$@\"\n")
        (bin_dir / "bbagent").chmod(0o755)
        commands = [c.replace(".venv/bin/bbagent", str(bin_dir / "bbagent")) for c in commands]
    outputs = []
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        outputs.append(done.stdout)
    assert "accepted after 2 round(s)" in outputs[0]
    assert (tmp_path / "generated_kernels" / "aten.relu.default").is_dir()
    assert re.search(r"served: \{'aten\.relu\.default': 1[,}]", outputs[-1]), outputs[-1]  # torch.relu, once
