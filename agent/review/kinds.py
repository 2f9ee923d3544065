"""What differs by kind for a kernel kept under ``generated_kernels/``, looked up once from its
meta.json's ``problem_kind`` (``stored_kind``). An operator's kernel is served as the aten
overloads its tests passed for and judged again as that operator; a program's answer serves no
overload, is judged again as the program text it was accepted for (kept beside it), may answer a
region that compiled code calls, and is what ``export --kernelbench`` writes. A new kind of
problem is a class here beside its class in ``harness.problem`` and ``agent.generate.posed``:
nothing that reads stored kernels asks which kind it has.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from bbagent.agent.errors import UsageError
from bbagent.agent.review.lifecycle import PROBLEM_FILE
from bbagent.agent.review.meta import KernelMeta, ProgramSource
from bbagent.harness.interface import ProgramProblem, describe_program, served_problem

if TYPE_CHECKING:
    from bbagent.harness.interface import OperatorProblem, ProgramFacts


class Kept(Protocol):
    """One stored version: its folder and what its meta.json says."""
    folder: Path
    meta: KernelMeta


class StoredKind(Protocol):
    def overloads(self, meta: KernelMeta) -> list[str]:
        """The aten overloads ``bbagent.enable()`` serves it as (none for a program's answer)."""
        ...

    def judged_as(self, kept: Kept) -> tuple[OperatorProblem | ProgramProblem, ProgramFacts | None]:
        """The problem it is judged again as (the operator as it serves it, or the program as it was
        when the answer was accepted: a UsageError where that text is not at hand) and what one
        shape-only run of it finds (None for an operator: the device memory a shared GPU must admit
        the evaluation with). The harness's errors are the caller's to word."""
        ...

    def kept_text(self, kept: Kept) -> str | None:
        """The problem's text an edit keeps beside itself (None: an operator needs none)."""
        ...

    def region(self, kept: Kept) -> ProgramProblem | None:
        """The region problem (``bbagent regions``) it answers, which compiled code may call; None
        where it answers none (a KernelBench problem is served by ``bbagent.load_program``). A
        UsageError where a region's or the user's own problem is no longer at hand."""
        ...

    def answered(self, meta: KernelMeta) -> ProgramSource:
        """The program it is an answer to (``bbagent.load_program``); a UsageError for an operator's kernel."""
        ...

    def kernelbench_answer(self, meta: KernelMeta) -> ProgramSource | None:
        """The program ``export --kernelbench`` writes it as an answer to (None: not exported)."""
        ...


class StoredOperator:
    def overloads(self, meta: KernelMeta) -> list[str]:
        return list(meta.serves)

    def judged_as(self, kept: Kept) -> tuple[OperatorProblem, None]:
        return served_problem(kept.meta.written_for, kept.meta.serves), None

    def kept_text(self, kept: Kept) -> None:
        return None

    def region(self, kept: Kept) -> None:
        return None

    def answered(self, meta: KernelMeta) -> ProgramSource:
        raise UsageError(f"{meta.op} names an operator's kernel, not a program's answer: use bbagent.load('{meta.op}')")

    def kernelbench_answer(self, meta: KernelMeta) -> None:
        return None


class StoredProgram:
    def overloads(self, meta: KernelMeta) -> list[str]:
        return []  # a ModelNew is loaded by bbagent.load_program

    def problem(self, kept: Kept) -> ProgramProblem:
        """The copy kept beside the answer (``problem.py``), else the file it was posed from while
        its text is unchanged."""
        program = self.answered(kept.meta)
        for where in (kept.folder / PROBLEM_FILE, Path(program.path)):
            try:
                problem = ProgramProblem(path=program.path, text=where.read_text(encoding="utf-8"), level=program.level)
            except (OSError, UnicodeDecodeError):
                continue
            if problem.sha256 == program.sha256:
                return problem
        raise UsageError(f"the problem {kept.meta.op}'s answer was accepted for is not at hand: {program.path} is "
                         f"gone or changed since (sha256 {program.sha256[:12]} then) and {kept.folder} keeps no "
                         f"{PROBLEM_FILE} (answers accepted before it was kept): put the file back as it was, or "
                         "generate an answer again")

    def judged_as(self, kept: Kept) -> tuple[ProgramProblem, ProgramFacts]:
        problem = self.problem(kept)
        return problem, describe_program(problem)

    def kept_text(self, kept: Kept) -> str:
        return self.problem(kept).text

    def region(self, kept: Kept) -> ProgramProblem | None:
        try:
            problem = self.problem(kept)
        except UsageError:
            if self.answered(kept.meta).level is not None:
                return None  # a KernelBench problem not at hand: nothing of it runs under compile
            raise  # a region's problem, or the user's own program: either way said
        return problem if "REGION_HASH" in problem.text else None

    def answered(self, meta: KernelMeta) -> ProgramSource:
        if meta.program is None:  # refused by meta.json's own check: a program's answer names its program
            raise UsageError(f"{meta.op}'s meta.json names no program")
        return meta.program

    def kernelbench_answer(self, meta: KernelMeta) -> ProgramSource:
        return self.answered(meta)


STORED_KINDS: dict[str, StoredKind] = {"operator": StoredOperator(), "program": StoredProgram()}


def stored_kind(meta: KernelMeta) -> StoredKind:
    """The kind of the kernel ``meta`` describes (meta.json's ``problem_kind``, checked when read)."""
    return STORED_KINDS[meta.problem_kind]
