"""What one run of ``generate`` (or one operator of a batch) is asked for, resolved once from the
name or the file given and handed down as it is: the harness's problem, and what the agent does
with it that differs by kind. ``Posed`` is what the loop and the run's start read;
``PosedOperator`` and ``PosedProgram`` are its kinds. A new kind of problem is a class here beside
its class in ``harness.problem``: nothing else in the agent's run asks which kind it has.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bbagent.agent.families import family_of
from bbagent.agent.generate.program_prompting import render_program_performance_feedback, render_program_prompt
from bbagent.agent.generate.prompting import render_performance_feedback, render_prompt, template_name
from bbagent.agent.generate.testable import refuse_untested
from bbagent.agent.judging import Evaluations, check_channels_last, problem_of, program_of
from bbagent.agent.options import GenerateOptions

if TYPE_CHECKING:
    from bbagent.harness.interface import OperatorProblem, ProgramFacts, ProgramProblem, Verdict


class Posed(Protocol):
    """A run's problem as the agent takes it."""

    @property
    def problem(self) -> OperatorProblem | ProgramProblem:
        ...

    @property
    def family(self) -> str:
        """The prompt family (an operator's, or "program")."""
        ...

    @property
    def needs_opinfo(self) -> bool:
        """Whether its tests come from OpInfo (a program's are its own draws)."""
        ...

    @property
    def key(self) -> str:
        """Its one name: runs, the call log, the ledger and ``generated_kernels/<key>/`` (``Problem.key``)."""
        ...

    @property
    def requested(self) -> str:
        """What the user named: an overload's name, a program's path."""
        ...

    @property
    def serves(self) -> tuple[str, ...]:
        """The overloads its kernel is tested and served as (none for a program)."""
        ...

    @property
    def variant_of(self) -> str | None:
        """The overload asked for in place of the one the user named, of which that one is a
        calling convention (``aten.relu_.default``: ``aten.relu.default``); None where what was
        named is what is asked for (always for a program)."""
        ...

    @property
    def also_serves(self) -> list[str]:
        ...

    @property
    def facts(self) -> ProgramFacts | None:
        """What one shape-only run of a program found (None for an operator)."""
        ...

    @property
    def prompt_template(self) -> str:
        """The first prompt's template, as the run record names it."""
        ...

    @property
    def answers_program(self) -> ProgramProblem | None:
        """The program an accepted answer answers (kept in its meta.json, its text beside it)."""
        ...

    @property
    def performance_template(self) -> str:
        """The template of the feedback on a correct, timed round."""
        ...

    def first_prompt(self, options: GenerateOptions) -> str:
        ...

    def performance_feedback(self, verdict: Verdict, **settings) -> str:
        """The feedback on a correct, timed round (``settings``: those of
        ``agent.generate.prompting.render_performance_feedback``)."""
        ...

    def channels_last(self, wanted: bool, quiet: bool = False) -> bool:
        """Whether its trace inputs also run channels-last, ``wanted`` or not
        (``agent.judging.check_channels_last``)."""
        ...

    def allow_library(self, options: GenerateOptions) -> str | None:
        """What an accepted answer was judged as allowed to leave to torch (meta.json records it), or
        None where the kind has no such policy."""
        ...

    def refuse_untestable(self, evaluations: Evaluations, extra_traces: dict | None) -> None:
        """A UsageError where nothing of it can be tested here, before any call is paid for."""
        ...


class _Names:
    """The names every kind reads from its harness problem alike."""
    problem: OperatorProblem | ProgramProblem

    @property
    def key(self) -> str:
        return self.problem.key

    @property
    def requested(self) -> str:
        return self.problem.requested

    @property
    def serves(self) -> tuple[str, ...]:
        return tuple(self.problem.names)

    @property
    def also_serves(self) -> list[str]:
        """The in-place and out= overloads served by the same kernel (none for a program)."""
        return self.problem.names[1:]


@dataclass(frozen=True)
class PosedOperator(_Names):
    """An aten operator: the overload the model is asked for, every overload its kernel is tested
    and served as, and the prompt family."""
    problem: OperatorProblem
    family: str
    needs_opinfo = True

    @property
    def facts(self) -> None:
        return None

    @property
    def variant_of(self) -> str | None:
        return self.key if self.key != self.requested else None

    @property
    def prompt_template(self) -> str:
        return template_name(self.key)

    @property
    def answers_program(self) -> None:
        return None

    performance_template = "performance.j2"

    def first_prompt(self, options: GenerateOptions) -> str:
        return render_prompt(self.problem, device=options.device, channels_last=options.channels_last, dsl=options.dsl)

    def performance_feedback(self, verdict: Verdict, **settings) -> str:
        return render_performance_feedback(verdict, **settings)

    def channels_last(self, wanted: bool, quiet: bool = False) -> bool:
        return check_channels_last(self.key, wanted, quiet=quiet)

    def allow_library(self, options: GenerateOptions) -> str | None:
        return None

    def refuse_untestable(self, evaluations: Evaluations, extra_traces: dict | None) -> None:
        refuse_untested(self.key, list(self.serves), evaluations, extra_traces)


@dataclass(frozen=True)
class PosedProgram(_Names):
    """A program in KernelBench's format: the harness's ``ProgramProblem`` and what one shape-only
    run of it found (``ProgramFacts``, for the first prompt). Named by its key
    (``kernelbench/level1/19_ReLU``) wherever an operator is named by its overload; it serves no
    aten overload."""
    problem: ProgramProblem
    program_facts: ProgramFacts
    family: str = "program"
    needs_opinfo = False

    @property
    def facts(self) -> ProgramFacts:
        return self.program_facts

    @property
    def variant_of(self) -> None:
        return None  # its key names the file the user gave

    @property
    def prompt_template(self) -> str:
        return "program.j2"

    @property
    def answers_program(self) -> ProgramProblem:
        return self.problem

    performance_template = "program_performance.j2"

    def first_prompt(self, options: GenerateOptions) -> str:
        return render_program_prompt(self.problem, self.program_facts, device=options.device,
                                     library=options.allow_library, dsl=options.dsl)

    def performance_feedback(self, verdict: Verdict, **settings) -> str:
        return render_program_performance_feedback(verdict, **settings)

    def channels_last(self, wanted: bool, quiet: bool = False) -> bool:
        return False  # its inputs are the program's own

    def allow_library(self, options: GenerateOptions) -> str | None:
        return options.allow_library

    def refuse_untestable(self, evaluations: Evaluations, extra_traces: dict | None) -> None:
        return None  # its tests are its own draws: never none


def posed_operator(op: str, exact_overload: bool = False) -> PosedOperator:
    """``op`` resolved (a UsageError where no such overload exists): asked for as the family's
    functional overload and served as the whole family, unless ``exact_overload`` (or the overload
    has no functional sibling)."""
    problem = problem_of(op, exact_overload=exact_overload)
    return PosedOperator(problem, family_of(problem.name))


def posed_program(path) -> PosedProgram:
    """The program problem in the file at ``path``, resolved once (``program_of``: a UsageError for a
    file that is no problem, or a program that cannot be set up)."""
    return PosedProgram(*program_of(path))
