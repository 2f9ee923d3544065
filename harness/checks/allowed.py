"""What a kernel's Python wrapper may ask of PyTorch besides launching Triton kernels.

One table, read by the run-time guard (``harness.checks.guards``, through ``is_allowed``), the
static check (``harness.checks.static_check``: the ``torch.X`` functions a fallback may call) and the
prompt (``agent.generate.prompting``: the examples), so that what the prompt allows and what the tests reject
cannot disagree.

What an aten operator is decides whether the guard allows it (``is_allowed``), read from its schema
and tags wherever they can tell:

* a view: every result is an alias of an argument (``Tensor(a)`` in the schema) and nothing is
  written (views, ``split``, ``unbind``, ``diagonal``, ``unfold``, ``real``, ...), or an in-place
  view (the ``inplace_view`` tag: ``squeeze_``, ``transpose_``, ...);
* arithmetic on types and host numbers: no tensor in and no tensor out (``promote_types``,
  ``can_cast``, ...);
* a type, device or layout query: only ``ScalarType``/``Device``/``Layout``/``MemoryFormat``/
  ``QScheme`` results (``result_type``).

What schemas cannot tell is listed by name in the ``aten`` column below, and only that: allocation
(a factory's values are constant), whole-tensor copies, shape and stride queries (a schema does not
tell ``size -> int`` from ``Int.Tensor -> int``, which reads a value), reading one value back
(``item``), ``_unsafe_view`` (a view whose schema has no alias annotation) and ``resize_``. Each example is runnable Python: ``tests/test_guards.py`` runs every one under
the guard, with ``x`` a float tensor of shape [4, 6], ``y`` one of shape [6], ``t`` a 1-element
int64 tensor, ``out`` an empty float tensor, ``shape`` = (4, 6), ``dtype`` = torch.float16 and
``generator`` a torch.Generator in scope.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Allowed:
    purpose: str
    examples: tuple[str, ...]   # runnable spellings, as the prompt shows them
    aten: tuple[str, ...]       # aten packet names (aten.<name>.*) they may reach
    note: str = ""


ALLOWED = (
    Allowed("allocate outputs and scratch buffers",
            ("torch.empty(shape, dtype=dtype, device=x.device)", "torch.empty_like(x)",
             "torch.empty_strided(shape, (1, 4), dtype=x.dtype, device=x.device)", "x.new_empty(shape)",
             "torch.zeros(shape, dtype=dtype, device=x.device)", "torch.zeros_like(x)", "x.new_zeros(shape)",
             "torch.ones_like(x)", "torch.full(shape, 2.0, dtype=dtype, device=x.device)", "torch.full_like(x, 2.0)",
             "torch.arange(6, device=x.device)", "out.fill_(0.5)", "out.zero_()"),
            ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
             "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill_", "zero_",
             "scalar_tensor", "arange", "lift_fresh")),
    Allowed("copy or convert whole tensors",
            ("x.contiguous()", "x.clone()", "out.copy_(x)", "x.to(dtype)"),
            ("clone", "copy_", "_to_copy", "contiguous"),
            note="for an operator that is itself a copy or a conversion (clone, cat, _to_copy, ...) the copying "
                 "is its computation and belongs in Triton"),
    Allowed("make views (no data moves)",
            ("x.view(24)", "x.reshape(shape)", "x.as_strided((2, 2), (1, 1))", "y.expand(shape)",
             "y.broadcast_to(shape)", "x.permute(1, 0)", "x.transpose(0, 1)", "x.t()", "x.unsqueeze(0)",
             "x.squeeze()", "x[1]", "x[1:3]", "x[..., ::2]", "x[None]", "x.narrow(0, 1, 2)", "x.select(1, 0)",
             "x.flatten()", "x.unflatten(1, (2, 3))", "x.movedim(0, 1)", "x.split(2)", "x.chunk(2, dim=1)",
             "x.unbind(0)", "x.detach()", "x.view(torch.int32)", "out.resize_(shape)"),
            ("_unsafe_view", "resize_"),  # every other view is told by its schema (is_allowed)
            note="`x.reshape` copies when no view is possible; `out.resize_` is for an out= argument of the wrong "
                 "shape"),
    Allowed("read metadata and dtype rules",
            ("x.shape", "x.size(0)", "x.stride()", "x.stride(1)", "x.numel()", "x.dim()", "x.dtype", "x.device",
             "x.is_contiguous()", "x.storage_offset()", "x.element_size()", "x.is_floating_point()",
             "torch.result_type(x, 2.5)", "torch.promote_types(x.dtype, dtype)", "torch.can_cast(x.dtype, dtype)",
             "torch.broadcast_shapes((4, 1), (6,))", "torch.finfo(x.dtype).max", "torch.iinfo(torch.int32).min",
             "torch.get_default_dtype()"),
            ("sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "size", "stride", "numel", "dim",
             "storage_offset", "element_size", "is_contiguous", "sym_is_contiguous", "is_non_overlapping_and_dense",
             "is_strides_like_format", "is_same_size", "is_floating_point", "is_complex", "is_signed", "is_conj",
             "is_neg")),  # result_type, promote_types and can_cast are told by their schemas (is_allowed)
    Allowed("read one value back to the host",
            ("t.item()", "int(t)"),
            ("item", "_local_scalar_dense"),
            note="a host synchronisation: it stalls the GPU, and a kernel that does it is timed without CUDA "
                 "graphs"),
)

# A random operator's kernel may draw its seed from the generator with one of these (a few values only).
SEED_DRAW = Allowed("draw the seed of a random kernel from its generator",
                    ("torch.randint(2**31 - 1, (1,), generator=generator, device=x.device)",),
                    ("randint", "random_"))
MAX_SEED_VALUES = 4

# Packet names (aten.<name>.*) a kernel wrapper may call whatever their schema says.
ALLOWED_ATEN = frozenset(name for row in ALLOWED for name in row.aten)

_TYPE_RESULTS = ("ScalarType", "Device", "Layout", "MemoryFormat", "QScheme")


def is_allowed(op) -> bool:
    """Whether a wrapper may call the aten overload ``op`` (an OpOverload) outside a Triton launch,
    the operator under test aside (the guard decides that)."""
    return op._schema.name.split("::")[-1] in ALLOWED_ATEN or kind_of(op) != "compute"


def kind_of(op) -> str:
    """"view", "type_arithmetic", "type_query" or "compute", read from the schema and tags."""
    schema = op._schema
    returns, arguments = schema.returns, schema.arguments
    if "inplace_view" in {str(tag).split(".")[-1] for tag in getattr(op, "tags", ())}:
        return "view"
    if schema.is_mutable:
        return "compute"
    if returns and all(r.alias_info is not None and not r.alias_info.is_write for r in returns):
        return "view"
    tensors = [x for x in list(arguments) + list(returns) if "Tensor" in str(x.type)]
    if returns and not tensors:
        return "type_arithmetic"
    result_types = str(schema).split(" -> ", 1)[-1].strip("()").split(", ")
    if returns and all(t.split(" ")[0] in _TYPE_RESULTS for t in result_types):
        return "type_query"
    return "compute"


def torch_functions() -> frozenset[str]:
    """``X`` of every ``torch.X(...)`` the table allows (``empty``, ``result_type``, ...)."""
    names = set()
    for row in ALLOWED:
        for example in row.examples:
            if example.startswith("torch."):
                names.add(example.split("(")[0].split(".")[1])
    return frozenset(names)
