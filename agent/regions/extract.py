"""Candidate regions of a model, found in the graphs inductor receives.

``inductor_graphs`` compiles the model with ``torch.compile`` and keeps a copy of each graph that
reaches inductor's post-grad passes (aten operators, decomposed as inductor decomposes them, shapes
known). ``matches`` grows regions in each (``agent.regions.spanning`` joins them across matrix
products and counts them by hash): from a seed, a matrix product or convolution (whose
epilogue inductor leaves apart in its default mode) or a reduction (a normalization's statistics,
a softmax's maximum and sum), through the users that inductor could fuse with it (pointwise
operators and views; from a reduction, further reductions too), while each added node's other
inputs come from before the seed or from the graph's inputs alone (a batch norm's scale, computed
from its parameters after the convolution: those operators join the region); a
region is kept where it holds a seed and at least one pointwise operator. Each region is hashed
by its operators, their arguments and its inputs' shapes and dtypes (``Region.hash``).
"""
from __future__ import annotations

import copy
import hashlib
import operator
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

MAX_OPS = 24  # nodes of one region, views included
MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm", "convolution", "_scaled_mm"})
REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "var_mean", "var", "prod", "_softmax", "_log_softmax",
                        "native_layer_norm", "native_group_norm", "_native_batch_norm_legit_no_training"})
VIEWS = frozenset({"view", "reshape", "_unsafe_view", "permute", "transpose", "expand", "squeeze", "unsqueeze",
                   "t", "clone", "slice", "select"})


class TensorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    shape: list[int]
    dtype: str  # ``float32``
    positive: bool = False  # an input the region takes a root, log or reciprocal of (a variance): drawn > 0


POSITIVE_ONLY = frozenset({"sqrt", "rsqrt", "log", "reciprocal"})


class RegionNode(BaseModel):
    """One operator call of a region: ``target`` an aten overload's name (``aten.addmm.default``)
    or ``getitem``; each argument a reference (``{"in": j}`` the region's j-th input, ``{"node": i}``
    its i-th node) or a constant, as data."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    target: str
    args: list
    kwargs: dict


class Region(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hash: str
    kind: str  # "matmul + epilogue", "reduction + pointwise"
    ops: list[str]  # the compute operators, in order (views left out)
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    output_nodes: list[int]
    nodes: list[RegionNode]
    count: int = 1
    gpu_us: float | None = None  # GPU time of one call, compiled alone (``agent.regions.share``)
    share: float | None = None  # count x gpu_us over the compiled model's GPU time per forward
    floor_us: float | None = None  # the roofline's floor of one call (``agent.regions.share``)


def inductor_graphs(model, inputs: tuple, backward: bool = False) -> list:
    """Copies of the graphs inductor receives for one call of ``model(*inputs)`` under
    ``torch.compile``, after its decompositions, as its post-grad passes see them: the inference
    graph (no gradient), or with ``backward`` the training forward and, from a backward of the sum
    of the first output, the backward graph."""
    import torch
    from torch._inductor import config
    graphs = []

    def keep(graph) -> None:
        graphs.append(copy.deepcopy(graph))
    previous = config.post_grad_custom_pre_pass
    torch._dynamo.reset()
    config.post_grad_custom_pre_pass = keep
    try:
        if backward:
            output = torch.compile(model)(*inputs)
            first = output[0] if isinstance(output, (tuple, list)) else output
            first.float().sum().backward()
        else:
            with torch.no_grad():
                torch.compile(model)(*inputs)
    finally:
        config.post_grad_custom_pre_pass = previous
        torch._dynamo.reset()
    return graphs


def packet_of(node) -> str | None:
    """The operator a graph's call makes, without namespace or overload (``addmm``); None for a
    call of no operator (``getitem``)."""
    overload = node.target
    schema = getattr(overload, "_schema", None)
    return schema.name.split("::")[-1] if schema is not None else None


def is_pointwise(node) -> bool:
    """Whether a graph's call is of an operator torch tags pointwise."""
    import torch
    return torch.Tag.pointwise in getattr(node.target, "tags", ())


def _fusible(node, reductions: bool) -> bool:
    """Whether ``node`` may join a region: pointwise operators and views always, reductions where
    ``reductions`` (a region grown from a reduction, not from a matrix product's epilogue)."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    return is_pointwise(node) or packet_of(node) in VIEWS or (reductions and packet_of(node) in REDUCTIONS)


@dataclass
class Match:
    """One region where it stands in a graph: its nodes in order, the nodes its inputs come from
    and those of its outputs (``Region.inputs``, ``Region.output_nodes`` in the same order)."""
    region: Region
    members: list
    inputs: list
    outputs: list


def inputs_before(match: Match) -> None:
    """Move the nodes the region's inputs come from, with what they are computed from, that stand
    after the region's first node to just before it, in their order, so that a call put in the
    region's place finds its inputs defined (a norm + matmul region's first node is the norm; the
    view of the third projection's weight comes after it). None of them reads the region: a
    region is closed."""
    first = match.members[0]
    position = {node: i for i, node in enumerate(first.graph.nodes)}
    start, moving, pending = position[first], set(), [node for node in match.inputs if hasattr(node, "op")]
    while pending:
        node = pending.pop()
        if node in moving or position[node] < start:
            continue
        moving.add(node)
        pending.extend(node.all_input_nodes)
    for node in sorted(moving, key=position.__getitem__):
        first.prepend(node)


def matches(graph) -> list[Match]:
    """The candidate regions of one graph, disjoint, in the graph's order."""
    nodes = list(graph.nodes)
    position = {node: i for i, node in enumerate(nodes)}
    taken: set = set()
    found = []
    for seed in nodes:
        if seed in taken or seed.op != "call_function" or packet_of(seed) not in MATMULS | REDUCTIONS:
            continue
        members = _grow(seed, position, taken)
        computing = [n for n in members if n.target is not operator.getitem and packet_of(n) not in VIEWS]
        if not any(is_pointwise(n) for n in computing):
            continue
        described = described_region(members)
        if described is None:
            continue
        taken.update(members)
        found.append(Match(described[0], members, described[1], [members[i] for i in described[0].output_nodes]))
    return found


def _grow(seed, position: dict, taken: set) -> list:
    members = [seed]
    inside = {seed}
    reductions = packet_of(seed) in REDUCTIONS  # a matrix product's region is it and its epilogue
    grew = True
    while grew and len(members) < MAX_OPS:
        grew = False
        for node in sorted({u for m in members for u in m.users}, key=position.__getitem__):
            if node in inside or node in taken or not _fusible(node, reductions) or len(members) >= MAX_OPS:
                continue
            pulled = []
            for a in node.all_input_nodes:
                if a in inside or a.op in ("placeholder", "get_attr") or position[a] < position[seed]:
                    continue
                chain = _from_inputs_alone(a, inside | {node}, taken)
                if chain is None:
                    break
                pulled += chain
            else:
                for added in [*pulled, node]:
                    if added not in inside:
                        members.append(added)
                        inside.add(added)
                grew = True
    return sorted(members, key=position.__getitem__)


def _from_inputs_alone(node, region: set, taken: set) -> list | None:
    """``node`` and the nodes it is computed from where it comes from the graph's inputs alone
    through pointwise operators and views used nowhere but the region (a batch norm's
    ``rsqrt(var + eps)``, unsqueezed, placed after the convolution whose epilogue uses it): they
    join the region, which then takes the parameters themselves. None where ``node`` is not such."""
    chain: list = []
    pending = [node]
    while pending:
        current = pending.pop()
        if current in chain or current in region or current.op in ("placeholder", "get_attr"):
            continue
        if current in taken or not _fusible(current, reductions=False) or current.target is operator.getitem:
            return None
        chain.append(current)
        pending.extend(current.all_input_nodes)
    if any(user not in region and user not in chain for current in chain for user in current.users):
        return None
    return chain


def described_region(members: list) -> tuple[Region, list] | None:
    """The region of these nodes and the nodes its inputs come from, or None where an argument
    cannot be written as a constant."""
    index = {node: i for i, node in enumerate(members)}
    inputs: list = []
    written = []

    def argument(value):
        import torch
        if hasattr(value, "op"):  # an fx Node
            if value in index:
                return {"node": index[value]}
            if value not in inputs:
                inputs.append(value)
            return {"in": inputs.index(value)}
        if isinstance(value, (list, tuple)):
            return [argument(v) for v in value]
        if isinstance(value, torch.dtype):
            return {"dtype": str(value).removeprefix("torch.")}
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise TypeError(type(value).__name__)
    try:
        for node in members:
            target = "getitem" if node.target is operator.getitem else _name(node.target)
            written.append(RegionNode(target=target, args=[argument(a) for a in node.args],
                                      kwargs={k: argument(v) for k, v in node.kwargs.items()}))
    except TypeError:
        return None
    outputs = [n for n in members if any(u not in index for u in n.users)]
    specs = [_spec(n) for n in inputs + outputs]
    known = [spec for spec in specs if spec is not None]
    if len(known) != len(specs):
        return None
    positive = _positive_inputs(members, inputs)
    input_specs = [spec.model_copy(update={"positive": n in positive}) for n, spec in zip(inputs, known)]
    output_specs = known[len(inputs):]
    canonical = repr(([w.model_dump() for w in written], [s.model_dump(exclude={"positive"}) for s in input_specs],
                      [index[n] for n in outputs]))
    ops = [w.target for w in written if w.target != "getitem" and w.target.split(".")[1] not in VIEWS]
    kind = "matmul + epilogue" if packet_of(members[0]) in MATMULS else "reduction + pointwise"
    return Region(hash=hashlib.sha256(canonical.encode()).hexdigest()[:12], kind=kind, ops=ops, inputs=input_specs,
                  outputs=output_specs, output_nodes=[index[n] for n in outputs], nodes=written), inputs


def _positive_inputs(members: list, inputs: list) -> set:
    """The inputs a root, log or reciprocal in the region is taken of without the seed's result
    in between (a batch norm's running variance), or of a mean or sum of them (an RMSNorm's
    squares, computed before the region): the problem must draw them positive."""
    from_seed = {members[0]}
    for node in members[1:]:
        if any(a in from_seed for a in node.all_input_nodes):
            from_seed.add(node)
    positive: set = set()
    for node in members:
        source = node.all_input_nodes[0] if packet_of(node) in POSITIVE_ONLY and node.all_input_nodes else None
        while source is not None and source in members and is_pointwise(source) and len(source.all_input_nodes) == 1:
            source = source.all_input_nodes[0]  # + eps
        if source is not None and source in members and packet_of(source) in ("mean", "sum") \
                and source.all_input_nodes[0] in inputs:
            positive.add(source.all_input_nodes[0])
    pending = [n for n in members if packet_of(n) in POSITIVE_ONLY and n not in from_seed]
    seen: set = set()
    while pending:
        node = pending.pop()
        if node in seen:
            continue
        seen.add(node)
        for a in node.all_input_nodes:
            if a in inputs:
                positive.add(a)
            elif a in members and a not in from_seed:
                pending.append(a)
    return positive


def _name(overload) -> str:
    """``aten.addmm.default``; an operator of another namespace keeps it (``prims.convert_element_type.default``,
    the casts of a bf16 model's graph), so that the problem's ``torch.ops`` call finds it."""
    return f"{overload.namespace}.{overload._schema.name.split('::')[-1]}.{overload._overloadname}"


def _spec(node) -> TensorSpec | None:
    value = node.meta.get("val")
    if value is None or not hasattr(value, "shape"):
        return None
    return TensorSpec(shape=[int(s) for s in value.shape], dtype=str(value.dtype).removeprefix("torch."))
