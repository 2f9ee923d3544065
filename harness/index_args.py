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
``("plane_of", argument)`` (H*W of its last two dims, for pooling indices).
"""
from __future__ import annotations

from typing import Any

import torch

from harness.inputs import memory_behind
from harness.ops import packet_name

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
    if kind == "class_dim":
        tensor = values.get(arg)
        return None if not isinstance(tensor, torch.Tensor) else tensor.shape[1 if tensor.dim() > 1 else 0]
    tensor, dim = values.get(kind), arg if isinstance(arg, int) else values.get(arg)
    if not isinstance(tensor, torch.Tensor) or not isinstance(dim, int):
        return None
    return tensor.shape[dim] if tensor.dim() else 1


def make_index_args_valid(op, args: tuple, kwargs: dict, gen: torch.Generator) -> None:
    """Redraw, in place, the index tensors of ``op``'s arguments so the op accepts them."""
    rules = INDEX_RULES.get(packet_name(op))
    if not rules:
        return
    names = [a.name for a in op._schema.arguments]
    values = dict(zip(names, args)) | kwargs
    for index_arg, source in rules:
        index = values.get(index_arg)
        bound = _bound(source, values)
        if not isinstance(index, torch.Tensor) or index.dtype.is_floating_point or not bound or index.numel() == 0:
            continue
        # Write the memory behind the view, not the view: a trace index may be broadcast
        # (stride 0), and a view whose elements overlap cannot be written element-wise.
        flat = memory_behind(index)
        drawn = torch.randint(0, bound, (flat.numel(),), generator=gen, device=index.device)
        if source[0] == "offsets_of":
            drawn = drawn.sort().values
            drawn[0] = 0
        flat.copy_(drawn.to(index.dtype))
