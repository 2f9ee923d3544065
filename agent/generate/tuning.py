"""The run's accepted Helion kernel tuned once its rounds ended (``--autotune-budget``).

Two evaluations of the accepted file (``harness.helion_configs`` says what each child does): the
first tunes it in its timing phase, with the GPU alone, within the budget, and returns the table
of configs it found; the second judges it again, every test and the timing, with that table
pinned. Only a kernel that passes so, and is not slower so than it was untuned, is kept with its
configs (``helion_configs.json`` beside it, its digest in meta.json); otherwise it keeps its
untuned configs, and run.json's ``tuning`` says why.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bbagent.agent.judging import Evaluations
from bbagent.agent.run_record import TuningRecord
from bbagent.harness.interface import ConfigTable, Verdict

SHOWN_UNTUNED = 3  # calls left untuned named in the record's message
SLOWER = 0.03  # tuned configs this much slower than the untuned ones (geomean over eager) are not kept


@dataclass(frozen=True)
class Tuned:
    """A kernel's tuned configs (the table's JSON, kept beside it) and its Verdict with them pinned."""
    configs: str
    verdict: Verdict


def tune(evaluations: Evaluations, kernel: Path, budget_s: float, record: TuningRecord,
         keep: Callable[[str, Verdict], object]) -> Tuned | None:
    """Tune ``kernel`` within ``budget_s`` seconds and judge it with what was found pinned; the
    outcome in ``record`` (filled in as it goes), each Verdict handed to ``keep`` with its name
    (``tuning``, ``pinned``). None where the kernel keeps its untuned configs."""
    tuning = evaluations.evaluate_as(evaluations.request.tuning(budget_s), kernel)
    keep("tuning", tuning)
    found = tuning.helion_configs.tuned if tuning.helion_configs is not None else None
    if not tuning.passed or found is None:
        record.outcome = "failed"
        record.message = (f"the tuning run failed ({tuning.error_kind}): {tuning.message[:400]}" if not tuning.passed
                          else "the tuning run found no @helion.kernel function at the top of the kernel's file")
        return None
    table = ConfigTable.from_json(found)
    record.configs, record.spent_s = len(table.configs), table.spent_s
    untuned = (f"; {len(table.untuned)} call(s) untuned: " + "; ".join(table.untuned[:SHOWN_UNTUNED])
               if table.untuned else "")
    if not table.configs:
        record.outcome, record.message = "untuned", "no search found a config" + untuned
        return None
    pinned = evaluations.evaluate_as(evaluations.request.without_profiles().pinned(found), kernel)
    keep("pinned", pinned)
    if not pinned.passed:
        record.outcome = "failed"
        record.message = (f"with its tuned configs pinned the kernel failed ({pinned.error_kind}): "
                          f"{pinned.message[:400]}; it keeps its untuned configs")
        return None
    record.speedup_tuned = tuned = pinned.geomean_speedup()
    found_in = f"{len(table.configs)} config(s) found in {table.spent_s:g} s of the {budget_s:g} s budget"
    untuned_speed = record.speedup_untuned
    if tuned is not None and untuned_speed is not None and tuned < untuned_speed * (1 - SLOWER):
        record.outcome = "slower"
        record.message = (f"{found_in}, judged pinned, but slower than the untuned kernel ({tuned:.2f}x against "
                          f"{untuned_speed:.2f}x over eager): it keeps its untuned configs{untuned}")
        return None
    record.outcome, record.message = "tuned", f"{found_in}, judged pinned{untuned}"
    return Tuned(found, pinned)
