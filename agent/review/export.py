"""Answers to KernelBench problems written out in the layout KernelBench's own scripts read, with
bbagent's judgement of each in the files KernelBench's analysis reads.

``OUT/level<L>/level_<L>_problem_<ID>_sample_<S>_kernel.py`` is one run folder per level, as
``scripts/eval_from_generations.py`` takes it (``runs_dir=OUT run_name=level<L> level=<L>``);
``OUT/bbagent-level<L>/eval_results.json`` (and ``pass_at_k_results.json`` with several samples)
are bbagent's Verdicts of the same files, for ``scripts/benchmark_eval_analysis.py``
(``eval_results_dir=OUT run_name=bbagent-level<L>``). The samples (``SAMPLES``):

- ``accepted``: sample 0 is each problem's accepted answer; only approved ones by default
  (``include_unreviewed``: the current one unless rejected). An answer whose approved file
  changed since is left out with why.
- ``first-round``: the answers of the first round of every run of each problem, in the order
  they were asked, right or wrong (answered from the same prompt with no feedback, they are
  KernelBench's independent samples, for pass@k); an answer without code is a sample too, written
  as a file saying so; a candidate never judged (its run killed) is left out.

A problem with no KernelBench level and number (a file not named ``<ID>_<name>.py`` under a
``level<N>`` folder) is left out with why. ``bbagent_export.json`` says what each file is.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from bbagent.agent.review.catalog import catalogue
from bbagent.agent.review.kernelbench_results import JudgedSample, write_results
from bbagent.agent.run_record import read_run
from bbagent.agent.storage import write_atomic, write_json
from bbagent.harness.interface import PROGRAMS_FOLDER, Verdict, problem_number

MANIFEST = "bbagent_export.json"
SAMPLES = ("accepted", "first-round")
NO_CODE = "# bbagent: the model's answer held no code block; KernelBench counts this sample as failed.\n"


def kernelbench_name(level: int, name: str, sample: int = 0) -> str | None:
    """``level_1_problem_19_sample_0_kernel.py`` for ``19_ReLU`` of level 1; None without a problem number."""
    number = problem_number(name)
    return f"level_{level}_problem_{number}_sample_{sample}_kernel.py" if number is not None else None


def export_kernelbench(root: Path, out_dir: Path, include_unreviewed: bool = False,
                       samples: str = "accepted") -> dict:
    """Write the answers under ``root`` to ``out_dir`` (module docstring); returns ``{"written":
    [...], "left_out": [...], "results": [...], "levels": [...], "manifest": path}``, each row
    naming the problem's key."""
    if samples not in SAMPLES:
        raise ValueError(f"samples is one of {SAMPLES} (got {samples!r})")
    written: list[dict] = []
    left_out: list[dict] = []
    judged: dict[int, dict[int, list[dict]]] = {}  # level: problem number: its samples' rows
    found = _accepted(root, include_unreviewed, left_out) if samples == "accepted" else _first_round(root, left_out)
    for key, level, name, text, sample, source in found:
        number = problem_number(name)
        if number is None:
            left_out.append({"problem": key, "why": f"{name} has no KernelBench problem number (a file <ID>_<name>.py)"})
            continue
        rows = judged.setdefault(level, {}).setdefault(number, [])
        file_name = kernelbench_name(level, name, len(rows))
        write_atomic(out_dir / f"level{level}" / str(file_name), text)
        rows.append(sample.row(len(rows)))
        written.append({"problem": key, "level": level, "sample": rows[-1]["sample_id"],
                        "file": f"level{level}/{file_name}", "passed": sample.passed, **source})
    results = [str(path) for level, rows in sorted(judged.items())
               for path in write_results(out_dir / f"bbagent-level{level}", rows)]
    manifest = out_dir / MANIFEST
    if written:
        write_json(manifest, {"samples": samples, "written": written, "left_out": left_out, "results": results})
    return {"written": written, "left_out": left_out, "results": results, "levels": sorted(judged),
            "samples_per_problem": max((len(r) for rows in judged.values() for r in rows.values()), default=0),
            "manifest": str(manifest) if written else None}


Found = tuple[str, int, str, str, JudgedSample, dict]  # key, level, name, text, judged, where it came from


def _accepted(root: Path, include_unreviewed: bool, left_out: list[dict]) -> Iterator[Found]:
    kernels, _ = catalogue(root)
    for entry in kernels:
        program = entry.current.kind.kernelbench_answer(entry.current.meta)
        if program is None:  # an operator's kernel: exported as KernelBench answers are not
            continue
        version = entry.served(include_unreviewed)
        why = why_not_exported(version, entry, include_unreviewed)
        if why is None and program.level is None:
            why = (f"{program.name} has no KernelBench level and number (a file <ID>_<name>.py under a "
                   "level<N> folder)")
        if why is not None or version is None or program.level is None:
            left_out.append({"problem": entry.op, "why": why})
            continue
        yield (entry.op, program.level, program.name, version.kernel.read_text(),
               JudgedSample.of_accepted(version.meta.performance, version.meta.tests),
               {"version": version.number, "status": version.status, "run_id": version.meta.run_id,
                "problem_sha256": program.sha256, "kernel_sha256": version.meta.kernel_sha256,
                "source": str(version.kernel)})


def _first_round(root: Path, left_out: list[dict]) -> Iterator[Found]:
    runs = sorted(p for p in (root / "runs").glob("*") if p.is_dir() and (p / "run.json").is_file())
    for run in runs:
        record = read_run(run)
        if record is None or not record.op.startswith(f"{PROGRAMS_FOLDER}/level"):
            continue
        level_folder, name = record.op.split("/")[1:3]
        level = int(level_folder[len("level"):]) if level_folder[len("level"):].isdigit() else None
        if level is None:
            continue
        first = run / "round-1"
        candidates = sorted(first.glob("candidate-*"), key=lambda p: int(p.name.split("-")[1])) or [first]
        for where in candidates if first.is_dir() else []:
            kernel, verdict = where / "kernel.py", where / "verdict.json"
            source = {"run_id": run.name, "source": str(kernel if kernel.is_file() else where / "response.md")}
            if not kernel.is_file() and (where / "response.md").is_file():  # answered without code: failed
                yield record.op, level, name, NO_CODE, JudgedSample(passed=False, error_kind="no_code"), source
            elif kernel.is_file() and verdict.is_file():
                yield (record.op, level, name, kernel.read_text(),
                       JudgedSample.of_verdict(Verdict.model_validate_json(verdict.read_text())), source)
            else:
                left_out.append({"problem": record.op, "why": f"{where} was never judged (its run ended first)"})


def why_not_exported(version, entry, include_unreviewed: bool) -> str | None:
    """Why ``version`` (``entry``'s to export) is not exported, or None."""
    if version is None:
        states = ", ".join(f"v{v.number} {v.status}" for v in entry.versions)
        stale = any(v.status == "stale" for v in entry.versions)
        return f"no {'usable' if include_unreviewed else 'approved'} version ({states})" + (
            f"; 'bbagent review verify {entry.op}' judges a stale one here again" if stale else "") + (
            "" if include_unreviewed else "; --include-unreviewed exports the current one")
    return version.unusable
