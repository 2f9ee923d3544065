"""Make index-like arguments of trace inputs valid.

A trace records only an index tensor's shape and dtype; random integers would make
``gather`` or ``nll_loss`` reject the input, and the op would go untested. For the
operators below, each index argument is redrawn uniformly in ``[0, bound)``, where the
bound is the size of another argument along a dimension, or an integer argument.

Rule: packet -> [(index argument, bound source)], where the bound source is
``(tensor argument, dim)`` with dim an int or the name of an int argument, or
``("class_dim", tensor argument)`` (dim 1 of a batched input, else dim 0), or
``("int", argument)`` for a bound given as an integer argument, or ``("offsets_of", argument)``
for bag offsets into that argument (sorted, starting at 0), ``("numel_of", argument)`` or
``("plane_of", argument)`` (H*W of its last two dims, for pooling indices), or
``("dims_of", argument)`` for a list of index tensors (``index``, ``index_put``): entry k
indexes the argument's dim k (a bool mask covers as many dims as it has), or
``("spatial_of", argument)`` for unpooling indices: positions inside one output plane whose
size is the product of the integer list ``argument``.

Writes through an index must not collide where the op keeps one of the colliding values:
``index_put`` without ``accumulate`` or ``scatter`` without ``reduce`` leave an unspecified
value there (on CUDA, whichever write lands last), so a reference would be a coin toss.
For the packets in ``DISTINCT_WRITES`` the indices are drawn distinct (along the op's dim for
a multi-dimensional index, within each plane for unpooling, as whole tuples for a list of
index tensors of one shape) unless the named argument makes collisions well defined.
Where there are more writes than places, collisions cannot be avoided; the op is then
unspecified for those inputs.
"""
from __future__ import annotations

import math
from typing import Any, TypeGuard

import torch

from bbagent.harness.inputs import memory_behind
from bbagent.harness.ops import packet_name

_ALONG_DIM = ("self", "dim")
INDEX_RULES: dict[str, list[tuple[str, tuple]]] = {
    "gather": [("index", _ALONG_DIM)],
    "scatter": [("index", _ALONG_DIM)],
    "scatter_": [("index", _ALONG_DIM)],
    "scatter_add": [("index", _ALONG_DIM)],
    "scatter_add_": [("index", _ALONG_DIM)],
    "scatter_reduce": [("index", _ALONG_DIM)],
    "index_select": [("index", _ALONG_DIM)],
    "index_add": [("index", _ALONG_DIM)],
    "index_add_": [("index", _ALONG_DIM)],
    "index_copy": [("index", _ALONG_DIM)],
    "index_fill": [("index", _ALONG_DIM)],
    "embedding": [("indices", ("weight", 0))],
    "_embedding_bag": [("indices", ("weight", 0)), ("offsets", ("offsets_of", "indices"))],
    "_embedding_bag_forward_only": [("indices", ("weight", 0)), ("offsets", ("offsets_of", "indices"))],
    "embedding_dense_backward": [("indices", ("int", "num_weights"))],
    "_embedding_bag_per_sample_weights_backward": [
        ("indices", ("weight", 0)), ("offsets", ("offsets_of", "indices")), ("offset2bag", ("numel_of", "offsets"))],
    "max_pool2d_with_indices_backward": [("indices", ("plane_of", "self"))],
    "nll_loss_forward": [("target", ("class_dim", "self"))],
    "nll_loss_backward": [("target", ("class_dim", "self"))],
    "nll_loss2d_forward": [("target", ("class_dim", "self"))],
    "nll_loss2d_backward": [("target", ("class_dim", "self"))],
    "scatter_reduce_": [("index", _ALONG_DIM)],
    "index_copy_": [("index", _ALONG_DIM)],
    "index_fill_": [("index", _ALONG_DIM)],
    "index_reduce": [("index", _ALONG_DIM)],
    "index_reduce_": [("index", _ALONG_DIM)],
    "take": [("index", ("numel_of", "self"))],
    "put": [("index", ("numel_of", "self"))],
    "put_": [("index", ("numel_of", "self"))],
    "index": [("indices", ("dims_of", "self"))],
    "_unsafe_index": [("indices", ("dims_of", "self"))],
    "index_put": [("indices", ("dims_of", "self"))],
    "index_put_": [("indices", ("dims_of", "self"))],
    "_index_put_impl_": [("indices", ("dims_of", "self"))],
    "_unsafe_index_put": [("indices", ("dims_of", "self"))],
    "max_unpool2d": [("indices", ("spatial_of", "output_size"))],
    "max_unpool3d": [("indices", ("spatial_of", "output_size"))],
}

# packet -> the argument that makes colliding writes well defined (None: nothing does)
DISTINCT_WRITES: dict[str, str | None] = {
    "index_put": "accumulate", "index_put_": "accumulate", "_index_put_impl_": "accumulate",
    "_unsafe_index_put": "accumulate", "put": "accumulate", "put_": "accumulate",
    "scatter": "reduce", "scatter_": "reduce", "index_copy": None, "index_copy_": None,
    "max_unpool2d": None, "max_unpool3d": None,
}


def _bound(source: tuple, values: dict[str, Any]) -> int | None:
    kind, arg = source
    tensor_arg = values.get(arg) if isinstance(arg, str) else None
    if kind in ("offsets_of", "numel_of", "plane_of"):
        if not isinstance(tensor_arg, torch.Tensor):
            return None
        if kind == "plane_of":  # flat position inside one (H, W) plane
            return tensor_arg.shape[-1] * tensor_arg.shape[-2] if tensor_arg.dim() >= 2 else None
        return tensor_arg.numel() + (1 if kind == "offsets_of" else 0)
    if kind == "int":
        return values.get(arg) if isinstance(values.get(arg), int) else None
    if kind == "spatial_of":
        sizes = values.get(arg)
        return math.prod(sizes) if isinstance(sizes, (list, tuple)) and sizes else None
    if kind == "class_dim":
        tensor = values.get(arg)
        return None if not isinstance(tensor, torch.Tensor) else tensor.shape[1 if tensor.dim() > 1 else 0]
    tensor, dim = values.get(kind), arg if isinstance(arg, int) else values.get(arg)
    if not isinstance(tensor, torch.Tensor) or not isinstance(dim, int):
        return None
    return tensor.shape[dim] if tensor.dim() else 1


def _wants_distinct(op, values: dict[str, Any]) -> bool:
    packet = packet_name(op)
    if packet not in DISTINCT_WRITES:
        return False
    unless = DISTINCT_WRITES[packet]
    return unless is None or not values.get(unless)


def make_index_args_valid(op, args: tuple, kwargs: dict, gen: torch.Generator) -> None:
    """Redraw, in place, the index tensors of ``op``'s arguments so the op accepts them."""
    rules = INDEX_RULES.get(packet_name(op))
    if not rules:
        return
    names = [a.name for a in op._schema.arguments]
    values = dict(zip(names, args)) | kwargs
    distinct = _wants_distinct(op, values)
    for index_arg, source in rules:
        index = values.get(index_arg)
        if source[0] == "dims_of":
            _redraw_index_list(index, values.get(source[1]), distinct, gen)
            continue
        bound = _bound(source, values)
        if not _redrawable(index) or not bound:
            continue
        layout = _distinct_layout(source, index, values) if distinct else None
        if layout:
            shape, dim = layout
            _write(index, _distinct_along(shape, dim, bound, gen, index.device), bound, gen)
        else:
            _redraw(index, bound, gen, sort=source[0] == "offsets_of")


def _distinct_layout(source: tuple, index: torch.Tensor, values: dict[str, Any]) -> tuple[tuple, int] | None:
    """(shape, dim): the index viewed so that its values must differ along ``dim`` (within
    each unpooling plane, across a flat index, or along the op's dim), or None for sources
    without a distinctness rule."""
    if source[0] == "spatial_of":
        planes = index.shape[-len(values[source[1]]):].numel()
        return (index.numel() // planes, planes), 1
    if source[0] == "numel_of":
        return (index.numel(),), 0
    if source == _ALONG_DIM:
        return tuple(index.shape), values.get("dim", 0) if index.dim() > 1 else 0
    return None


def _redrawable(index: Any) -> TypeGuard[torch.Tensor]:
    return isinstance(index, torch.Tensor) and not index.dtype.is_floating_point \
        and index.dtype != torch.bool and index.numel() > 0


def _redraw(index: torch.Tensor, bound: int, gen: torch.Generator, sort: bool = False) -> None:
    """Independent draws in ``[0, bound)``. The memory behind the view is written, not the
    view: a trace index may be broadcast (stride 0), and overlapping elements cannot be
    written element-wise."""
    flat = memory_behind(index)
    drawn = torch.randint(0, bound, (flat.numel(),), generator=gen, device=index.device)
    if sort:  # bag offsets: ascending, from 0
        drawn = drawn.sort().values
        drawn[0] = 0
    flat.copy_(drawn.to(index.dtype))


def _distinct_along(shape: tuple, dim: int, bound: int, gen: torch.Generator, device) -> torch.Tensor | None:
    """Values in ``[0, bound)`` of ``shape``, distinct along ``dim`` (None where the dim is
    longer than ``bound``: then some must repeat)."""
    dim = dim % len(shape)
    if shape[dim] > bound:
        return None
    keys_shape = shape[:dim] + (bound,) + shape[dim + 1:]
    if math.prod(keys_shape) > MAX_DISTINCT_KEYS:
        return None
    keys = torch.rand(keys_shape, generator=gen, device=device)
    return keys.argsort(dim=dim).narrow(dim, 0, shape[dim])


MAX_DISTINCT_KEYS = 1 << 24


def _write(index: torch.Tensor, drawn: torch.Tensor | None, bound: int, gen: torch.Generator) -> None:
    """Write distinct draws into ``index``; a broadcast index (whose elements share memory)
    or one that cannot be distinct gets independent draws instead."""
    if drawn is None or memory_behind(index).numel() < index.numel():
        _redraw(index, bound, gen)
    else:
        index.copy_(drawn.reshape(index.shape).to(index.dtype))


def _redraw_index_list(indices: Any, tensor: Any, distinct: bool, gen: torch.Generator) -> None:
    """``indices[k]`` indexes ``tensor``'s dim k (a bool mask covers mask.dim() dims, None one)."""
    if not isinstance(indices, (list, tuple)) or not isinstance(tensor, torch.Tensor):
        return
    dim, targets = 0, []
    for index in indices:
        if isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8):
            dim += index.dim()
            continue
        if dim >= tensor.dim():
            return
        if _redrawable(index):
            targets.append((index, tensor.shape[dim]))
        dim += 1
    shapes = {tuple(index.shape) for index, _ in targets}
    if distinct and len(shapes) == 1 and all(b > 0 for _, b in targets):
        # distinct index tuples: distinct flat positions in the indexed dims, unravelled
        bounds = [b for _, b in targets]
        positions = _distinct_along((targets[0][0].numel(),), 0, math.prod(bounds), gen, tensor.device)
        if positions is not None:
            for (index, bound), coordinate in zip(targets, torch.unravel_index(positions, bounds)):
                _write(index, coordinate, bound, gen)
            return
    for index, bound in targets:
        if bound:
            _redraw(index, bound, gen)

