"""What a kernel is asked to compute: the Problem, resolved once on each side of the process boundary.

One kind today, an aten operator (``OperatorProblem``): the overload the kernel computes (tested
and timed first), every overload it is tested and served as (its variant family, the in-place and
``out=`` overloads through ``harness.adapters``) and the overload whose calling convention the
kernel file has. The parent builds it from the names it was given (``operator_problem``, one
``resolve_op`` per name given; the family comes from the schemas, ``harness.variants``), the child
from its wire form (``from_wire``, the computation's name resolved, its family from the schemas); both pass the resolved overloads
on and never look a name up again. A PyTorch program will be a second kind with its own ``kind``
on the wire.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bbagent.harness import ops


@dataclass(frozen=True)
class OperatorProblem:
    """An aten overload to write a kernel for. ``serves`` holds ``computation`` first."""
    computation: object  # a torch._ops.OpOverload, as are serves' and written_for
    serves: tuple
    written_for: object
    requested: str = ""  # the name as it was given, before the family's functional overload was chosen
    kind: ClassVar[str] = "operator"

    @property
    def name(self) -> str:
        """``aten.relu.default``: the computation's name."""
        return ops.op_name(self.computation)

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
        import dataclasses
        kernel_for = _resolved(name, self.serves)
        serves = self.serves
        if kernel_for in serves:
            serves = (kernel_for,) + tuple(op for op in serves if op is not kernel_for)
        _check_servable(kernel_for, serves)
        return dataclasses.replace(self, computation=serves[0], serves=serves, written_for=kernel_for)

    def to_wire(self) -> dict:
        """Plain data for the other side of the process boundary (``from_wire`` reads it)."""
        return {"kind": self.kind, "serves": self.names, "written_for": self.written_for_name,
                "requested": self.requested or self.name}

    @classmethod
    def from_wire(cls, data: dict) -> "OperatorProblem":
        """The problem ``to_wire`` sent: the computation resolved by name, the other overloads
        found among its family's (from the schemas), and resolved by name only where not there."""
        from bbagent.harness.variants import family_members
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
    from bbagent.harness.variants import family_members
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
    from bbagent.harness.variants import family_members
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
    from bbagent.harness.adapters import check_serves
    for target in serves:
        check_serves(written_for, target)
