"""Accepted answers to programs written out in the layout KernelBench's own scripts read
(``scripts/eval_from_generations.py`` looks for ``level_<L>_problem_<ID>_sample_<S>_kernel.py`` in
its run folder), so that KernelBench's evaluation runs them unchanged.

Only approved answers by default (``include_unreviewed``: the current one unless rejected); an
answer whose problem has no KernelBench level or number (a file not named ``<ID>_<name>.py``
under a ``level<N>`` folder), or whose approved file changed since, is left out with why.
``bbagent_export.json`` beside the files says what each one is.
"""
from __future__ import annotations

from pathlib import Path

from bbagent.agent.review.catalog import catalogue
from bbagent.agent.storage import write_atomic, write_json
from bbagent.harness.interface import problem_number

SAMPLE = 0
MANIFEST = "bbagent_export.json"


def kernelbench_name(level: int, name: str) -> str | None:
    """``level_1_problem_19_sample_0_kernel.py`` for ``19_ReLU`` of level 1; None without a problem number."""
    number = problem_number(name)
    return f"level_{level}_problem_{number}_sample_{SAMPLE}_kernel.py" if number is not None else None


def export_kernelbench(root: Path, out_dir: Path, include_unreviewed: bool = False) -> dict:
    """Write the accepted answers under ``root`` to ``out_dir``; returns ``{"written": [...],
    "left_out": [...], "manifest": path}``, each row naming the problem's key."""
    written, left_out = [], []
    kernels, _ = catalogue(root)
    for entry in kernels:
        program = entry.current.kind.kernelbench_answer(entry.current.meta)
        if program is None:  # an operator's kernel: exported as KernelBench answers are not
            continue
        version = entry.served(include_unreviewed)
        why = why_not_exported(version, entry, include_unreviewed)
        file_name = kernelbench_name(program.level, program.name) if program.level else None
        if why is None and file_name is None:
            why = (f"{program.name} has no KernelBench level and number (a file <ID>_<name>.py under a "
                   "level<N> folder)")
        if why is not None or version is None or file_name is None:
            left_out.append({"problem": entry.op, "why": why})
            continue
        out_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(out_dir / file_name, version.kernel.read_text())
        written.append({"problem": entry.op, "file": file_name, "version": version.number, "status": version.status,
                        "run_id": version.meta.run_id, "problem_sha256": program.sha256,
                        "kernel_sha256": version.meta.kernel_sha256, "source": str(version.kernel)})
    manifest = out_dir / MANIFEST
    if written:
        write_json(manifest, {"written": written, "left_out": left_out})
    return {"written": written, "left_out": left_out, "manifest": str(manifest) if written else None}


def why_not_exported(version, entry, include_unreviewed: bool) -> str | None:
    """Why ``version`` (``entry``'s to export) is not exported, or None."""
    if version is None:
        states = ", ".join(f"v{v.number} {v.status}" for v in entry.versions)
        stale = any(v.status == "stale" for v in entry.versions)
        return f"no {'usable' if include_unreviewed else 'approved'} version ({states})" + (
            f"; 'bbagent review verify {entry.op}' judges a stale one here again" if stale else "") + (
            "" if include_unreviewed else "; --include-unreviewed exports the current one")
    return version.unusable
