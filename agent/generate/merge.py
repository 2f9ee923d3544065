"""Several Python module sources put into one module, each keeping its own names apart.

Every name a part binds at its top level (functions, classes, constants) gets the part's suffix
(``kernel`` -> ``kernel_round2``) wherever the part refers to it as a global; names local to a
function, attributes, keyword arguments and strings are left alone. Imports keep their names
unless two parts (or the module that hosts them) bind one name to different things. The text
is edited in place, so comments and layout survive for review; ``from __future__`` imports move
to the top of the result. Whatever this cannot rename for sure (``global`` statements, star
imports) makes ``merge`` raise ``CannotMerge`` rather than produce a module that might mean
something else.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from bbagent.harness.interface import parse


class CannotMerge(ValueError):
    pass


@dataclass(frozen=True)
class Part:
    source: str
    suffix: str  # appended to the part's top-level names: "_round2"


@dataclass(frozen=True)
class Merged:
    future: list[str]  # the ``from __future__`` lines, for the top of the module
    bodies: list[str]  # each part's source with its names renamed and its future imports removed
    renamed: list[dict[str, str]]  # per part: old name -> new name


def merge(parts: list[Part], host_names: dict[str, tuple]) -> Merged:
    """Rename each part's top-level names apart. ``host_names``: the names the hosting module binds
    itself (name -> what it is bound to, as ``_import_identity`` gives it), which parts must not rebind."""
    trees = []
    for part in parts:
        try:
            trees.append(parse(part.source))
        except SyntaxError as exc:
            raise CannotMerge(f"a part does not parse: {exc}") from None
    bindings = [_top_level_bindings(tree) for tree in trees]
    taken = set(host_names) | {name for tree in trees for name in _all_identifiers(tree)}
    future, bodies, renamed = [], [], []
    for part, tree, (names, imports) in zip(parts, trees, bindings):
        others = [other for _, other in bindings if other is not imports] + [host_names]
        clashing = {name for name, what in imports.items()
                    if any(name in other and other[name] != what for other in others)}
        mapping = {}
        for name in sorted((names - set(imports)) | clashing):
            new = name + part.suffix
            while new in taken:
                new += "_"
            taken.add(new)
            mapping[name] = new
        body, lines = _renamed(part.source, tree, mapping)
        future += [line for line in lines if line not in future]
        bodies.append(body)
        renamed.append(mapping)
    return Merged(future, bodies, renamed)


def _import_identity(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple:
    if isinstance(node, ast.Import):
        bound = alias.name if alias.asname else alias.name.split(".")[0]
        return ("import", bound)
    return ("from", node.module, node.level, alias.name)


def import_identity(statement: str) -> dict[str, tuple]:
    """What the names of one import statement are bound to (for ``host_names``)."""
    node = parse(statement).body[0]
    if not isinstance(node, (ast.Import, ast.ImportFrom)):
        raise ValueError(f"not an import statement: {statement!r}")
    return {(alias.asname or alias.name.split(".")[0]): _import_identity(node, alias) for alias in node.names}


def _top_level_bindings(tree: ast.Module) -> tuple[set[str], dict[str, tuple]]:
    """The names the module binds at its top level (in any statement not inside a function or
    class body), and of those the imported ones with what each is bound to."""
    names: set[str] = set()
    imports: dict[str, tuple] = {}

    def visit(statements):
        for node in statements:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                    continue
                for alias in node.names:
                    if alias.name == "*":
                        raise CannotMerge("a part imports with '*', whose names cannot be told apart")
                    name = alias.asname or alias.name.split(".")[0]
                    identity = _import_identity(node, alias)
                    imports[name] = identity if imports.get(name, identity) == identity else ("several",)
                    names.add(name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)):
                heads = [getattr(node, "test", None), getattr(node, "target", None), getattr(node, "iter", None)]
                heads += [part for item in getattr(node, "items", []) for part in (item.context_expr, item.optional_vars)]
                names.update(name for head in heads if head is not None for name in _stored_names(head))
                for handler in getattr(node, "handlers", []):
                    if handler.name:
                        names.add(handler.name)
                    visit(handler.body)
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(node, field, []))
            else:
                names.update(_stored_names(node))
    visit(tree.body)
    return names, imports


def _stored_names(node: ast.AST) -> set[str]:
    """Names an expression or simple statement stores in its own scope (lambdas and
    comprehensions have their own)."""
    found = set()
    pending = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, (ast.Lambda, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            continue
        if isinstance(current, ast.Name) and isinstance(current.ctx, (ast.Store, ast.Del)):
            found.add(current.id)
        pending.extend(ast.iter_child_nodes(current))
    return found


def _all_identifiers(tree: ast.Module) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, ast.alias):
            found.add(node.asname or node.name.split(".")[0])
    return found


def _renamed(source: str, tree: ast.Module, mapping: dict[str, str]) -> tuple[str, list[str]]:
    """``source`` with every global reference to a name of ``mapping`` renamed, and its
    ``from __future__`` lines taken out (returned apart)."""
    lines = source.splitlines(keepends=True)
    encoded = [line.encode() for line in lines]
    edits: list[tuple[int, int, int | None, str]] = []  # (line index, start byte, end byte, new text)
    future: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            if node.end_lineno != node.lineno:
                raise CannotMerge(f"line {node.lineno}: a 'from __future__' import over several lines")
            future.append(ast.get_source_segment(source, node) or "")
            edits.append((node.lineno - 1, node.col_offset, node.end_col_offset, "pass  # (moved to the top)"))
    _Renamer(mapping, encoded, edits).visit(tree)
    for index, start, end, text in sorted(edits, reverse=True):
        line = encoded[index]
        encoded[index] = line[:start] + text.encode() + line[end:]
    return b"".join(encoded).decode(), future


class _Renamer(ast.NodeVisitor):
    """Collects the edits that rename global references, tracking which names each function,
    lambda, comprehension and class binds itself (those hide the global)."""

    def __init__(self, mapping: dict[str, str], encoded: list[bytes], edits: list):
        self.mapping, self.encoded, self.edits = mapping, encoded, edits
        self.scopes: list[set[str]] = []  # innermost last; empty at module level

    def _rename_at(self, lineno: int, col: int, end_col: int | None, name: str, text: str | None = None) -> None:
        self.edits.append((lineno - 1, col, end_col, self.mapping[name] if text is None else text))

    def _hidden(self, name: str) -> bool:
        return any(name in scope for scope in self.scopes)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.mapping and not self._hidden(node.id):
            self._rename_at(node.lineno, node.col_offset, node.end_col_offset, node.id)

    def visit_Import(self, node) -> None:
        """An import binding a renamed name: ``import x as new`` / ``from m import x as new``."""
        for alias in node.names:
            name = alias.asname or alias.name.split(".")[0]
            if name not in self.mapping or self._hidden(name):
                continue
            if isinstance(node, ast.Import) and alias.asname is None and "." in alias.name:
                raise CannotMerge(f"line {node.lineno}: 'import {alias.name}' binds '{name}', which two parts "
                                  "bind to different things")
            self._rename_at(alias.lineno, alias.col_offset, alias.end_col_offset, name,
                            f"{alias.name} as {self.mapping[name]}")

    visit_ImportFrom = visit_Import

    def visit_Global(self, node) -> None:
        if any(name in self.mapping for name in node.names):
            raise CannotMerge(f"line {node.lineno}: a 'global' statement for a renamed name")

    visit_Nonlocal = visit_Global

    def _definition_name(self, node) -> None:
        """The name after ``def``/``class``, renamed where it is a global."""
        if node.name not in self.mapping or self._hidden(node.name):
            return
        line = self.encoded[node.lineno - 1]
        found = re.compile(rb"(?:def|class)\s+(" + re.escape(node.name.encode()) + rb")\b").search(line,
                                                                                                   node.col_offset)
        if found is None:
            raise CannotMerge(f"line {node.lineno}: cannot find the name of '{node.name}'")
        self._rename_at(node.lineno, found.start(1), found.end(1), node.name)

    def visit_FunctionDef(self, node, class_names: set[str] | None = None) -> None:
        """A function; a method (``class_names``: its class body's own names) is named in its
        class, and its decorators and defaults see the class body's names."""
        if class_names is not None:
            self.scopes.append(class_names)
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.visit(node.args)  # defaults and annotations belong to the enclosing scope
        if node.returns is not None:
            self.visit(node.returns)
        if class_names is not None:
            self.scopes.pop()
        else:
            self._definition_name(node)
        self.scopes.append(_bound_in_function(node))
        for statement in node.body:
            self.visit(statement)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_arguments(self, node: ast.arguments) -> None:
        for default in node.defaults + [d for d in node.kw_defaults if d is not None]:
            self.visit(default)
        for arg in node.posonlyargs + node.args + node.kwonlyargs + [node.vararg, node.kwarg]:
            if arg is not None and arg.annotation is not None:
                self.visit(arg.annotation)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.args)
        self.scopes.append(_argument_names(node.args))
        self.visit(node.body)
        self.scopes.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expression in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(expression)
        self._definition_name(node)
        # a class body's own names hide globals within the body itself, not within its methods
        definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        own = {s.name for s in node.body if isinstance(s, definitions)}
        own |= {name for s in node.body if not isinstance(s, definitions) for name in _stored_names(s)}
        for statement in node.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.visit_FunctionDef(statement, class_names=own)
            else:
                self.scopes.append(own)
                self.visit(statement)
                self.scopes.pop()

    def _comprehension(self, node, results: list) -> None:
        bound = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        self.visit(node.generators[0].iter)  # the first iterable is evaluated in the enclosing scope
        self.scopes.append(bound)
        for number, generator in enumerate(node.generators):
            self.visit(generator.target)
            if number:
                self.visit(generator.iter)
            for condition in generator.ifs:
                self.visit(condition)
        for result in results:
            self.visit(result)
        self.scopes.pop()

    def visit_ListComp(self, node) -> None:
        self._comprehension(node, [node.elt])

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node) -> None:
        self._comprehension(node, [node.key, node.value])


def _argument_names(args: ast.arguments) -> set[str]:
    return {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg] if a is not None}


def _bound_in_function(node) -> set[str]:
    """The names a function binds (its locals): its arguments and every name it stores, imports,
    defines or catches; nested functions', lambdas' and comprehensions' own names excepted."""
    bound = _argument_names(node.args)
    pending = list(node.body)
    while pending:
        current = pending.pop()
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(current.name)
            continue
        if isinstance(current, (ast.Lambda, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            continue
        if isinstance(current, ast.Name) and isinstance(current.ctx, (ast.Store, ast.Del)):
            bound.add(current.id)
        elif isinstance(current, ast.alias):
            bound.add(current.asname or current.name.split(".")[0])
        elif isinstance(current, ast.ExceptHandler) and current.name:
            bound.add(current.name)
        pending.extend(ast.iter_child_nodes(current))
    return bound
