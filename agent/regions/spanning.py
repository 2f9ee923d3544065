"""Regions across matrix products: the work torch.compile leaves between its calls.

Inductor fuses the pointwise work and reductions around each matrix product, but it keeps each
product a call of its own (cuBLAS, or its template): what runs between the products goes through
memory at every boundary. The regions here span those boundaries, built from the regions
``agent.regions.extract.matches`` finds (each taken whole or not at all) and the calls between:

- ``norm + matmul``: a normalization (a reduction region) and every matrix product that reads its
  output (an RMSNorm and the projections after it), with those products' epilogues;
- ``gated MLP``: two matrix products of one input whose results meet in a pointwise product
  (SiLU or GELU of the gate times the up projection), and the product that reads it alone (the
  down projection; its epilogue, the residual add and what the next layer's norm starts with, is
  left out, so that every layer's region is one);
- ``attention``: a batched product, the softmax over its scaled and masked result, and the
  batched product that reads the softmax (where inductor does not already call a fused kernel);
- ``matmul + pointwise + matmul``: a matrix product, the pointwise work computed from its result
  alone (other operands computed apart: a bias, a saved activation), and the matrix products that
  read that work (each without its epilogue): a plain MLP's up projection, GELU and down
  projection (GPT-2, BERT, ViT), and in a backward graph the gated MLP's: the gradient of the down
  projection, the SiLU's and the multiply's derivatives, and the products giving the input's and
  the weights' gradients (and the biases', sums of the same rows).

A region must be closed: no path leaves it and comes back (``_closed``); it then becomes a program
problem and is served under torch.compile exactly as a region of ``extract`` is (its hash, its
inputs, its outputs). ``candidates`` gives these before the regions they overlap, so that an
answer to the larger region is served where one is approved.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

from bbagent.agent.regions.extract import MATMULS, VIEWS, Match, Region, described_region, is_pointwise, matches, packet_of

MAX_SPAN_NODES = 96  # views included
NORMS = frozenset({"mean", "var_mean", "var", "native_layer_norm", "native_group_norm"})
SOFTMAXES = frozenset({"amax", "_softmax"})
BIAS_GRADIENTS = frozenset({"sum"})  # beside a backward's products: a bias's gradient, the rows summed


@dataclass
class Units:
    """The nodes of one graph by the region each belongs to (a region of ``extract`` is taken
    whole), with the graph's order."""
    position: dict
    unit_of: dict

    def unit(self, node) -> list:
        return self.unit_of.get(node, [node])


def candidates(graph) -> list[Match]:
    """Every region of ``graph`` a served answer may take: the regions across matrix products
    first (the module docstring), then ``extract``'s, which they may overlap."""
    base = matches(graph)
    return spanning(graph, base) + base


def find_regions(graphs: list) -> list[Region]:
    """The candidate regions of ``graphs``, one per hash, the most frequent first."""
    found: dict[str, Region] = {}
    for graph in graphs:
        for match in candidates(graph):
            if match.region.hash in found:
                found[match.region.hash].count += 1
            else:
                found[match.region.hash] = match.region
    return sorted(found.values(), key=lambda r: (-r.count, -len(r.ops)))


def spanning(graph, base: list[Match]) -> list[Match]:
    """The regions across matrix products of ``graph`` (``base``: its regions from ``extract``),
    one per set of nodes, in the graph's order of their first node."""
    nodes = list(graph.nodes)
    units = Units(position={node: i for i, node in enumerate(nodes)},
                  unit_of={node: match.members for match in base for node in match.members})
    found: dict[frozenset, Match] = {}
    for kind, members in [*_norm_then_matmuls(base, units), *_gated_mlps(nodes, units), *_attentions(base, units),
                          *_product_chains(nodes, units)]:
        key = frozenset(members)
        if key in found or len(members) > MAX_SPAN_NODES or not _closed(members):
            continue
        ordered = sorted(members, key=units.position.__getitem__)
        described = described_region(ordered)
        if described is None:
            continue
        region, inputs = described
        region = region.model_copy(update={"kind": kind})
        found[key] = Match(region, ordered, inputs, [ordered[i] for i in region.output_nodes])
    return sorted(found.values(), key=lambda m: units.position[m.members[0]])


def _norm_then_matmuls(base: list[Match], units: Units):
    """A normalization's region with the matrix products reading its output, each with its
    epilogue, and the pointwise work its statistic is computed from that nothing else reads (an
    RMSNorm's squares: the region then takes the rows themselves, in every layer alike)."""
    for match in base:
        if packet_of(match.members[0]) not in NORMS:
            continue
        members = set(match.members)
        readers, views = _readers(match.outputs, members)
        if not readers or not all(packet_of(r) in MATMULS for r in readers):
            continue
        members |= views | _producers(match.members[0], members)
        for reader in readers:
            members |= set(units.unit(reader))
        yield "norm + matmul", members


def _gated_mlps(nodes: list, units: Units):
    """Two matrix products of one input meeting in a pointwise product, and the matrix product
    that alone reads the result."""
    for meet in nodes:
        if meet.op != "call_function" or not is_pointwise(meet) or len(meet.all_input_nodes) != 2:
            continue
        sides = [_from_matmul(a) for a in meet.all_input_nodes]
        if any(side is None for side in sides) or sides[0][0] is sides[1][0]:
            continue
        (first, first_path), (second, second_path) = sides
        (shared, first_views), (other, second_views) = _activation(first), _activation(second)
        if shared is not other:
            continue
        members = {meet, *first_path, *second_path, *units.unit(first), *units.unit(second), *first_views,
                   *second_views}  # the one input itself, not a view of it per product
        readers, views = _readers([meet], members)
        if len(readers) == 1 and packet_of(readers[0]) in MATMULS:  # its epilogue left out: it differs by layer
            members |= views | {readers[0]}
        yield "gated MLP", members


def _attentions(base: list[Match], units: Units):
    """A softmax's region between the batched product it normalizes and the one reading it."""
    for match in base:
        if packet_of(match.members[0]) not in SOFTMAXES:
            continue
        source = _from_matmul(match.members[0].all_input_nodes[0])
        readers, views = _readers(match.outputs, set(match.members))
        if source is None or len(readers) != 1 or packet_of(readers[0]) not in {"bmm", "baddbmm"}:
            continue
        product, path = source
        if packet_of(product) not in {"bmm", "baddbmm"}:
            continue
        yield "attention", {*match.members, *path, *views, *units.unit(product), *units.unit(readers[0])}


def _product_chains(nodes: list, units: Units):
    """A matrix product, the pointwise calls computed from it alone whose results only matrix
    products read (through views; and in a backward, the sums giving a bias's gradient), and those
    readers; one region per first product."""
    chains: dict = {}
    for node in nodes:
        if node.op != "call_function" or not is_pointwise(node):
            continue
        readers, views = _readers([node], set())
        kinds = {packet_of(reader) for reader in readers}
        if not kinds & MATMULS or not kinds <= MATMULS | BIAS_GRADIENTS:
            continue
        source = _from_matmul(node)
        if source is None:
            continue
        product, path = source
        chains.setdefault(product, set()).update({node, *path, *views, *readers, *units.unit(product)})
    for members in chains.values():
        yield "matmul + pointwise + matmul", members


def _readers(outputs: list, inside: set) -> tuple[list, set]:
    """The calls outside ``inside`` that read ``outputs``, looking through views (and the views);
    the graph's output is no reader (what a training graph keeps for the backward stays an output
    of the region)."""
    readers, views, pending, seen = [], set(), list(outputs), set()
    while pending:
        for user in pending.pop().users:
            if user in seen or user.op == "output":
                continue
            seen.add(user)
            if user.op == "call_function" and (packet_of(user) in VIEWS or user.target is operator.getitem):
                pending.append(user)  # looked through, inside the region or not
                if user not in inside:
                    views.add(user)
            elif user not in inside:
                readers.append(user)
    return readers, views


def _from_matmul(node):
    """The one matrix product ``node`` is computed from through pointwise calls and views (an
    activation, a scale, a mask added), with the calls between; what has no matrix product before
    it (a mask, a table of constants) is an input, not a call between. None where another call
    (a concatenation, an indexing) is between, or where more than one matrix product is."""
    path, sources, pending, seen = [], set(), [node], set()
    while pending:
        current = pending.pop()
        if current in seen or current.op != "call_function":
            continue
        seen.add(current)
        if packet_of(current) in MATMULS:
            sources.add(current)
            continue
        if not _has_matmul_before(current):
            continue  # computed apart from any product: the region takes it as an input
        if not (is_pointwise(current) or packet_of(current) in VIEWS):
            return None
        path.append(current)
        pending.extend(current.all_input_nodes)
    return (sources.pop(), path) if len(sources) == 1 else None


def _has_matmul_before(node, limit: int = 256) -> bool:
    """Whether a matrix product is among what ``node`` is computed from (looked for among
    ``limit`` nodes at most; beyond that, assumed)."""
    pending, seen = [node], set[object]()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        if len(seen) >= limit:
            return True
        seen.add(current)
        if current.op == "call_function" and packet_of(current) in MATMULS:
            return True
        pending.extend(current.all_input_nodes)
    return False


def _activation(product) -> tuple:
    """The tensor a matrix product multiplies by its weight, and the views between."""
    node, views = product.args[1] if packet_of(product) == "addmm" else product.args[0], []
    while hasattr(node, "op") and node.op == "call_function" and packet_of(node) in VIEWS:
        views.append(node)
        node = node.all_input_nodes[0]
    return node, views


def _producers(seed, inside: set) -> set:
    """The pointwise calls and views ``seed`` is computed from that nothing outside the region
    reads (taken from a region of ``extract`` they stand in, where one holds them)."""
    joined: set = set()
    pending = list(seed.all_input_nodes)
    while pending:
        node = pending.pop()
        if node in inside or node in joined or node.op != "call_function":
            continue
        if not (is_pointwise(node) or packet_of(node) in VIEWS):
            continue
        if any(user not in inside and user not in joined for user in node.users):
            continue
        joined.add(node)
        pending.extend(node.all_input_nodes)
    return joined


def _closed(members: set) -> bool:
    """No path leaves the region and comes back into it."""
    outside = [user for node in members for user in node.users if user not in members]
    seen: set = set()
    while outside:
        node = outside.pop()
        if node in seen:
            continue
        seen.add(node)
        for user in node.users:
            if user in members:
                return False
            outside.append(user)
    return True
