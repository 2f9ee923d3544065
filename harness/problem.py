"""What a kernel is asked to compute: the Problem, resolved once on each side of the process boundary.

One kind today, an aten operator (``OperatorProblem``): the overload the kernel computes (tested
and timed first), every overload it is tested and served as (its variant family, the in-place and
``out=`` overloads through ``harness.adapters``) and the overload whose calling convention the
kernel file has. The parent builds it from the names it was given (``operator_problem``, one
``resolve_op`` per name given; the family comes from the schemas, ``harness.variants``), the child
from its wire form (``from_wire``, the computation's name resolved, its family from the schemas); both pass the resolved overloads
on and never look a name up again.

The second kind, a PyTorch program in KernelBench's format (``ProgramProblem``): a file defining
``Model`` (an ``nn.Module``), ``get_inputs()`` and ``get_init_inputs()``, answered by a module
defining ``ModelNew``. ``program_problem`` checks the file's shape without running it; what it
computes is found by running it (``harness.program_facts``).

Both are a ``Problem``: what differs by kind (its one name, its wire form, the baseline its speed
is measured against by default, whether a suite is built ahead, what it serves) is an attribute or
method of its class, and ``KINDS`` registers the classes by kind. Beside this module, the tables that
name a kind are the child's ``JOBS_BY_KIND`` (``harness.sandbox.child.worker``) and the agent's own
classes per kind (``agent.generate.posed``, ``agent.review.kinds``).
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal, Protocol

from torch._ops import OpOverload

from bbagent.harness import ops
from bbagent.harness.adapters import check_serves
from bbagent.harness.variants import family_members

ProblemKind = Literal["operator", "program"]  # each registered in KINDS; Verdict and meta.json declare the same


class Problem(Protocol):
    """What a kernel or an answer is asked to compute, of whichever kind."""
    kind: ClassVar[ProblemKind]  # the wire form's "kind", Verdict.problem_kind and meta.json's problem_kind
    default_baseline: ClassVar[str]  # what an answer's speed is measured against unless asked otherwise
    suite_ahead: ClassVar[bool]  # whether a suite of tests is built ahead (a program's draws are made per test)
    ncu_refused: ClassVar[str | None]  # why Nsight Compute is not run on its answers (None: it is)

    @property
    def key(self) -> str:
        """Its one name in every record: runs, the call log, the ledger, ``generated_kernels/<key>/``,
        the Verdict and the child's Job."""
        ...

    @property
    def name(self) -> str:
        """How a person reads it: an overload's name, or a program's file name without ``.py``."""
        ...

    @property
    def names(self) -> list[str]:
        """The aten overloads its kernel is tested and served as (none for a program)."""
        ...

    @property
    def cache_key(self) -> str:
        """Its name in the timing cache: two problems whose timings differ never share one."""
        ...

    @property
    def overloads(self) -> dict[str, OpOverload]:
        """``names`` with their overloads, the computation first (empty for a program)."""
        ...

    def to_wire(self) -> dict:
        """Plain data for the other side of the process boundary; ``problem_from_wire`` reads it."""
        ...


@dataclass(frozen=True)
class OperatorProblem:
    """An aten overload to write a kernel for. ``serves`` holds ``computation`` first."""
    computation: OpOverload
    serves: tuple[OpOverload, ...]
    written_for: OpOverload
    requested: str = ""  # the name as it was given, before the family's functional overload was chosen
    kind: ClassVar[ProblemKind] = "operator"
    default_baseline: ClassVar[str] = "eager"
    suite_ahead: ClassVar[bool] = True
    ncu_refused: ClassVar[str | None] = None

    @property
    def name(self) -> str:
        """``aten.relu.default``: the computation's name."""
        return ops.op_name(self.computation)

    @property
    def key(self) -> str:
        return self.name

    @property
    def cache_key(self) -> str:
        return self.name

    @property
    def overloads(self) -> dict[str, OpOverload]:
        return dict(zip(self.names, self.serves))

    @property
    def names(self) -> list[str]:
        """Every served overload's name, the computation first."""
        return [ops.op_name(op) for op in self.serves]

    @property
    def also_serves(self) -> list[str]:
        """The overloads served besides the computation (through the adapters)."""
        return self.names[1:]

    @property
    def written_for_name(self) -> str:
        return ops.op_name(self.written_for)

    def written_as(self, name: str) -> "OperatorProblem":
        """The same problem for a kernel file written for the overload ``name`` (found among those
        served, else resolved), which is then tested first where it is served. ``AdapterError``
        where such a kernel cannot serve every overload."""
        kernel_for = _resolved(name, self.serves)
        serves = self.serves
        if kernel_for in serves:
            serves = (kernel_for,) + tuple(op for op in serves if op is not kernel_for)
        _check_servable(kernel_for, serves)
        return dataclasses.replace(self, computation=serves[0], serves=serves, written_for=kernel_for)

    def to_wire(self) -> dict:
        """Plain data for the other side of the process boundary (``from_wire`` reads it)."""
        return {"kind": self.kind, "key": self.key, "serves": self.names, "written_for": self.written_for_name,
                "requested": self.requested or self.name}

    @classmethod
    def from_wire(cls, data: dict) -> "OperatorProblem":
        """The problem ``to_wire`` sent: the computation resolved by name, the other overloads
        found among its family's (from the schemas), and resolved by name only where not there."""
        if data.get("kind") != cls.kind:
            raise ValueError(f"not an operator problem: kind {data.get('kind')!r}")
        computation = ops.resolve_op(data["serves"][0])
        known = (computation,) + family_members(computation)[1]
        serves = (computation,) + tuple(_resolved(name, known) for name in data["serves"][1:])
        return cls(computation=computation, serves=serves, written_for=_resolved(data["written_for"], serves),
                   requested=data.get("requested", ""))


def operator_problem(name: str, *, exact_overload: bool = False) -> OperatorProblem:
    """The problem ``generate`` poses for ``name`` (``UnknownOpError`` where no such overload
    exists): the family's functional overload, served as the whole family, unless
    ``exact_overload`` (or the overload has no functional sibling), then ``name`` alone."""
    requested = ops.resolve_op(name)
    functional, members = family_members(requested)
    if exact_overload or functional is None:
        return OperatorProblem(computation=requested, serves=(requested,), written_for=requested, requested=name)
    _check_servable(functional, members)
    return OperatorProblem(computation=functional, serves=members, written_for=functional, requested=name)


def problem_to_test(name: str, *, family: bool = False) -> OperatorProblem:
    """The problem a given kernel file is tested on: ``name`` (with ``family``, every overload of
    its family, ``name`` first), for a kernel written for ``name``; ``written_as`` names the
    overload the file was written for, and checks that such a kernel serves them all.
    ``UnknownOpError`` for a name that is no overload."""
    requested = ops.resolve_op(name)
    serves = family_members(requested)[1] if family else (requested,)
    serves = (requested,) + tuple(op for op in serves if op is not requested)
    return OperatorProblem(computation=requested, serves=serves, written_for=requested, requested=name)


def served_problem(written_for: str, serves: list[str]) -> OperatorProblem:
    """The problem of a stored kernel: written for ``written_for``, served as ``serves`` (its
    meta.json's names), its own overload tested first."""
    names = [written_for] + [name for name in serves if name != written_for]
    return OperatorProblem.from_wire({"kind": OperatorProblem.kind, "serves": names, "written_for": written_for,
                                      "requested": written_for})


def _resolved(name: str, known: tuple):
    """The overload named ``name``: one of ``known`` if it is there (no second look-up), else resolved."""
    return next((op for op in known if ops.op_name(op) == name), None) or ops.resolve_op(name)


def _check_servable(written_for, serves: tuple) -> None:
    """``AdapterError`` unless a kernel written for ``written_for`` can serve every overload of ``serves``."""
    for target in serves:
        check_serves(written_for, target)


class ProblemError(ValueError):
    """A file that is not a program problem, or one whose program cannot be set up: the caller's to fix."""


PROGRAM_NAMES = ("Model", "get_inputs", "get_init_inputs")
PROGRAMS_FOLDER = "kernelbench"  # generated_kernels/kernelbench/level<N>/<problem>/: accepted answers to programs


@dataclass(frozen=True)
class ProgramProblem:
    """A PyTorch program in KernelBench's format: its ``text`` as read from ``path`` (absolute) when
    the problem was posed (the child and a remote node run that text, never the file again), and
    ``level``, KernelBench's, from a ``level<N>`` folder above the file (None elsewhere)."""
    path: str
    text: str
    level: int | None = None
    kind: ClassVar[ProblemKind] = "program"
    default_baseline: ClassVar[str] = "inductor"  # its bar is torch.compile
    suite_ahead: ClassVar[bool] = False
    ncu_refused: ClassVar[str | None] = ("Nsight Compute is not run on a program; the torch profiler's kernels "
                                         "of Model and ModelNew are in the feedback")

    @property
    def name(self) -> str:
        """``19_ReLU``: the file's name without ``.py``."""
        return Path(self.path).stem

    @property
    def names(self) -> list[str]:
        return []

    @property
    def requested(self) -> str:
        return self.path

    @property
    def overloads(self) -> dict[str, OpOverload]:
        return {}

    @property
    def cache_key(self) -> str:
        """Its key and the digest of its text (``kernelbench/level1/19_ReLU@3f2a9c1b7d0e``): two texts
        of one name never share cached timings."""
        return f"{self.key}@{self.sha256[:12]}"

    @property
    def key(self) -> str:
        """Where its answers are kept and how runs, batches and reviews name it (``program_key``)."""
        return program_key(self.level, self.name)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def to_wire(self) -> dict:
        return {"kind": self.kind, "key": self.key, "path": self.path, "text": self.text, "level": self.level}

    @classmethod
    def from_wire(cls, data: dict) -> "ProgramProblem":
        if data.get("kind") != cls.kind:
            raise ValueError(f"not a program problem: kind {data.get('kind')!r}")
        return cls(path=data["path"], text=data["text"], level=data.get("level"))


def program_key(level: int | None, name: str) -> str:
    """``kernelbench/level1/19_ReLU`` (``kernelbench/other/NAME`` for a file under no ``level<N>``)."""
    return f"{PROGRAMS_FOLDER}/{f'level{level}' if level is not None else 'other'}/{name}"


def problem_number(name: str) -> int | None:
    """19 of ``19_ReLU``: KernelBench's number of a problem; None for a name without one."""
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() else None


def reference_model(module, seed: int, device: str, init: list | None = None):
    """The problem's ``Model`` built from ``init`` (default: its ``get_init_inputs()``) under ``seed``,
    on ``device``: the weights every child of one evaluation builds alike."""
    import torch
    init = module.get_init_inputs() if init is None else init
    torch.manual_seed(seed)
    return module.Model(*init).to(device)


def given_inputs(module, seed: int, device: str) -> list:
    """The problem's own ``get_inputs()`` drawn under ``seed``, made on ``device``."""
    import torch
    torch.manual_seed(seed)
    with torch.device(device):
        return list(module.get_inputs())


KINDS: dict[str, type[OperatorProblem] | type[ProgramProblem]] = {kind.kind: kind for kind in (OperatorProblem,
                                                                                           ProgramProblem)}


def kind_named(kind: str) -> type[OperatorProblem] | type[ProgramProblem]:
    """The class of the problems of ``kind`` (a Verdict's or a meta.json's ``problem_kind``)."""
    if kind not in KINDS:
        raise ValueError(f"no problem kind {kind!r} (known: {', '.join(KINDS)})")
    return KINDS[kind]


def problem_from_wire(data: dict) -> OperatorProblem | ProgramProblem:
    """The problem, of whichever kind, that ``to_wire`` sent."""
    return kind_named(data.get("kind", "")).from_wire(data)


def program_problem(path: str | Path) -> ProgramProblem:
    """The problem the file at ``path`` poses, checked without running it: a Python file defining
    a class ``Model`` and the functions ``get_inputs`` and ``get_init_inputs`` at its top level.
    ``ProblemError``, in words, for anything else."""
    path = Path(path).expanduser().absolute()
    text = _read_text(path)
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise ProblemError(f"{path} is not a Python file a problem can be read from: {exc.msg} "
                           f"(line {exc.lineno})") from None
    defined = {node.name: node for node in tree.body
               if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}
    wrong = [name for name, wanted in (("Model", ast.ClassDef), ("get_inputs", ast.FunctionDef),
                                       ("get_init_inputs", ast.FunctionDef))
             if not isinstance(defined.get(name), wanted)]
    if wrong:
        raise ProblemError(f"{path} is not a problem in KernelBench's format: it must define, at its top level, "
                           f"class Model(nn.Module), def get_inputs() and def get_init_inputs(); it lacks "
                           f"{', '.join(wrong)} (it defines: {', '.join(sorted(defined)) or 'nothing'})")
    return ProgramProblem(path=str(path), text=text, level=_level(path))


def program_module(problem: ProgramProblem):
    """The problem's text run as a module of its own name (two problems never share one), its
    functions' code named by the problem's path; what it raises is raised."""
    name = f"bbagent_problem_{problem.sha256[:16]}"
    module = types.ModuleType(name)
    module.__file__ = problem.path
    sys.modules[name] = module
    try:
        exec(compile(problem.text, problem.path, "exec"), module.__dict__)  # noqa: S102 - the user's reference program
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise ProblemError(f"{path}: no such file" if not path.exists() else f"{path} is not a file")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{path} cannot be read as text: {exc}") from None


def _level(path: Path) -> int | None:
    """KernelBench's level of a problem under a ``level<N>`` folder (``KernelBench/level2/...``)."""
    for folder in path.parents:
        found = re.fullmatch(r"level(\d+)", folder.name)
        if found:
            return int(found.group(1))
    return None
