"""Static guards: read the candidate's source (never import it) and reject what no kernel needs.

Rules, each finding naming the line:

* ``forbidden_import``: process, network, introspection and FFI modules
  (``subprocess``, ``socket``, ``ctypes``, ``inspect``, ``gc``, ``sqlite3``, ...) and
  ``torch.utils.cpp_extension``.
* ``forbidden_call``: ``eval``/``exec``/``compile``/``__import__``/``open``/``setattr``/
  ``globals``, ``os.system``/``os.popen``/``os.fork``/``os.exec*``, ``sys._getframe``; file
  reads and native code the audit hook cannot see (``torch.from_file``, ``torch.load``,
  ``torch.ops.load_library``); ways out of namespaces (``os.chroot``, ``os.unshare``, ``os.setns``,
  ``os.mknod``).
* ``secret_read``: any use of ``os.environ`` / ``os.getenv`` / ``os.putenv``.
* ``torch_fallback``: a ``try`` whose ``except`` (or ``else``/``finally``) calls PyTorch
  compute (``torch.X`` outside the allocation/metadata allowlist, ``torch.ops.*``,
  ``torch.nn.functional.*``) — a fallback that hides a failing kernel.
* ``tampering``: assignment to (or deletion of) an attribute of any imported module, or of
  anything imported from one (a class, a function), stdlib modules included: monkeypatching
  ``torch``, ``triton``, the timers, ``re.sub`` or the reference. Also class and object mutation by
  any spelling this check can see (``type.__setattr__``, ``object.__setattr__``, ``__delattr__``,
  ``__class__`` assignment; ``setattr`` is a forbidden call and so is naming it), changing torch's
  global numerics (``torch.set_float32_matmul_precision``, ``torch.set_default_dtype``, ...), which
  the reference shares, and registering an implementation of an ``aten`` operator through
  ``torch.library``. (The sandbox checks the same at run time: ``harness.checks.integrity``.)
* ``side_stream``: ``torch.cuda.Stream`` / ``torch.cuda.stream`` / ``set_stream`` — work on
  another stream escapes synchronisation and timing.
* ``introspection``: reaching the harness that shares the process: ``sys.modules``, frame
  and function internals (``__globals__``, ``f_back``, ``__subclasses__``, ...), and
  ``getattr`` with a computed name (which would hide any of the above from this check).
* ``wrong_dsl``: an answer asked in a kernel language with a decorator of its own (Helion's
  ``@helion.kernel``) that defines no function so decorated (``harness.dsl``).
* ``tensor_subclass``: a class deriving from ``torch.Tensor`` (or ``Parameter``), a
  ``__torch_function__`` or ``__torch_dispatch__`` of its own, ``as_subclass`` and
  ``_make_subclass``: a result that runs its own code whenever torch touches it (the run-time
  rule is ``harness.plain``).
"""
from __future__ import annotations

import ast

from bbagent.harness.checks.allowed import torch_functions
from bbagent.harness.dsl import TRITON, Dsl
from bbagent.harness.parse import parse

FORBIDDEN_MODULES = frozenset({
    "subprocess", "socket", "ctypes", "inspect", "gc", "multiprocessing", "threading",
    "shutil", "urllib", "http", "requests", "httpx", "pickle", "marshal", "importlib", "builtins",
    "pty", "fcntl", "resource", "asyncio", "concurrent", "ssl", "ftplib", "smtplib", "telnetlib",
    "cffi", "mmap", "traceback", "faulthandler", "sqlite3", "cupy", "numba", "jax",
})
FORBIDDEN_BUILTINS = frozenset({"eval", "exec", "compile", "__import__", "open", "setattr", "delattr",
                                "globals", "vars", "breakpoint", "input"})
FORBIDDEN_ATTR_CALLS = frozenset({
    "os.system", "os.popen", "os.fork", "os.forkpty", "os.spawnl", "os.spawnv",
    "os.execv", "os.execve", "os.execl", "os.execlp", "os.execvp", "os.remove", "os.unlink",
    "os.open", "os.write", "sys._getframe", "sys.settrace", "sys.setprofile",
    # native code or file reads that no audit hook sees, and ways out of the sandbox's namespaces
    "torch.from_file", "torch.load", "torch.ops.load_library", "torch.classes.load_library",
    "os.chroot", "os.unshare", "os.setns", "os.mknod",
})
FORBIDDEN_SUBMODULES = frozenset({"torch.utils.cpp_extension"})  # compiles and loads native code
# Not listed on purpose: sys.exit, os._exit, os.kill. They harm only the candidate's own
# process, and the run-time fault reporting turns them into a precise 'crash' verdict.
SECRET_ATTRS = frozenset({"os.environ", "os.getenv", "os.putenv", "os.environb", "os.unsetenv"})
STREAM_ATTRS = frozenset({"torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream",
                          "torch.cuda.ExternalStream", "torch.Stream"})
INTROSPECTION_ATTRS = frozenset({
    "__globals__", "__builtins__", "__subclasses__", "__code__", "__closure__", "__dict__",
    "__bases__", "__mro__", "__base__", "__loader__", "__spec__", "__self__", "__func__",
    "f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "tb_next", "gi_frame", "cr_frame",
    "ag_frame", "__traceback__",
})
# asking whether a CUDA graph is being captured: the way to behave differently inside one
CAPTURE_ATTRS = frozenset({"is_current_stream_capturing", "_cuda_isCurrentStreamCapturing", "CUDAGraph", "graph_pool_handle",
                           "make_graphed_callables", "is_stream_capturing"})
# handing a tensor's memory to another library, which then computes what a Triton kernel must
HANDOFF_ATTRS = frozenset({"numpy", "__array__", "__array_interface__", "__cuda_array_interface__", "__dlpack__",
                           "from_dlpack", "to_dlpack", "dlpack"})
MUTATION_ATTRS = frozenset({"__setattr__", "__delattr__", "__class__"})  # on classes or objects
GLOBAL_STATE_CALLS = frozenset({
    "torch.set_float32_matmul_precision", "torch.set_default_dtype", "torch.set_default_tensor_type",
    "torch.set_default_device", "torch.use_deterministic_algorithms", "torch.set_flush_denormal",
    "torch.backends.cuda.preferred_blas_library", "torch.backends.cuda.preferred_linalg_library",
    "torch._C._set_cublas_allow_tf32", "torch._C._set_cudnn_allow_tf32", "torch._C._set_default_dtype",
})
LIBRARY_CALLS = frozenset({"torch.library.Library", "torch.library.impl", "torch.library.register_kernel",
                           "torch.library.register_fake", "torch.library.register_autograd",
                           "torch.library.register_torch_dispatch", "torch._C._dispatch_library"})
TENSOR_CLASSES = frozenset({"torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter",
                            "torch.nn.Buffer", "torch._C.TensorBase", "torch._C._TensorBase"})
SUBCLASS_HOOKS = frozenset({"__torch_function__", "__torch_dispatch__"})
SUBCLASS_ATTRS = frozenset({"as_subclass", "_make_subclass", "_make_wrapper_subclass"})
INTROSPECTION_NAMES = frozenset({"sys.modules", "sys.meta_path", "sys.path_hooks", "sys.exc_info",
                                 "sys.exception", "sys.last_traceback"})
# standard modules that other modules hold as attributes (torch.sys, torch.cuda.os): named from there
REACHED_MODULES = frozenset({"sys", "os", "time"})
PATCH_ROOTS = frozenset({"torch", "triton", "time", "sys", "os", "tl"})
# torch.<name> a fallback may call without it counting as compute: what the kernel contract allows
# (harness.checks.allowed) and names that are not PyTorch calls at all.
TORCH_NON_COMPUTE = torch_functions() | frozenset({"device", "Size", "is_tensor", "is_floating_point",
                                                   "is_complex"})


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the source binds: assigned, defined, imported, a parameter or a loop variable."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    return bound


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Checker(ast.NodeVisitor):
    def __init__(self, tree: ast.AST):
        self.findings: list[dict] = []
        self.aliases: dict[str, str] = {}  # local name -> module path ("F" -> "torch.nn.functional")
        self.bound = _bound_names(tree)  # names the module defines itself (a local called 'input' is no builtin)
        self.call_heads = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}

    def add(self, guard: str, node: ast.AST, message: str) -> None:
        self.findings.append({"guard": guard, "line": getattr(node, "lineno", None),
                              "message": f"line {getattr(node, 'lineno', '?')}: {message}"})

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name, imports resolved; a standard module reached as another module's attribute
        (``torch.sys.modules``, ``torch.cuda.os.environ``) is named from that module on."""
        name = _dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head in self.aliases:
            name = self.aliases[head] + ("." + rest if rest else "")
        parts = name.split(".")
        for i, part in enumerate(parts[1:], start=1):
            if part in REACHED_MODULES:
                return ".".join(parts[i:])
        return name

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)
            self.aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._check_module(module, node)
        for alias in node.names:
            full = f"{module}.{alias.name}"
            self._check_module(full, node)
            self.aliases[alias.asname or alias.name] = full

    def _check_module(self, module: str, node: ast.AST) -> None:
        root = module.split(".")[0]
        if root in FORBIDDEN_MODULES or any(module == m or module.startswith(m + ".") for m in FORBIDDEN_SUBMODULES):
            self.add("forbidden_import", node, f"imports '{module}', which a kernel does not need "
                                               "(process, network, introspection or FFI access is not allowed)")
        if module in SECRET_ATTRS:
            self.add("secret_read", node, f"imports '{module}'; kernels must not read the environment")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.resolve(node)
        spelled = _dotted(node)
        if spelled and node.attr in FORBIDDEN_MODULES and "." in spelled:
            self.add("forbidden_import", node, f"reaches the module '{node.attr}' through '{spelled}', which a kernel "
                                               "does not need (process, network, introspection or FFI access is not "
                                               "allowed)")
        if name in SECRET_ATTRS:
            self.add("secret_read", node, f"uses '{name}'; kernels must not read the environment")
        elif name in STREAM_ATTRS:
            self.add("side_stream", node, f"uses '{name}'; run all work on the current stream")
        elif name in INTROSPECTION_NAMES or node.attr in INTROSPECTION_ATTRS:
            self.add("introspection", node, f"uses '{name or node.attr}'; kernels must not reach into "
                                            "modules, frames or functions other than their own")
        elif node.attr in MUTATION_ATTRS and node.attr != "__class__":
            self.add("tampering", node, f"uses '{name or node.attr}'; changing classes or objects that are not "
                                        "the kernel's own (type.__setattr__, object.__setattr__) is not allowed")
        elif node.attr in SUBCLASS_ATTRS or node.attr in SUBCLASS_HOOKS:
            self.add("tensor_subclass", node, f"uses '{node.attr}'; {SUBCLASS_ADVICE}")
        elif node.attr in CAPTURE_ATTRS:
            self.add("graph_capture", node, f"uses '{name or node.attr}'; a kernel must do the same work whether or not "
                                            "a CUDA graph is being captured (models replay captured kernels on new "
                                            "values)")
        elif node.attr in HANDOFF_ATTRS:
            self.add("library_handoff", node, f"uses '{name or node.attr}', which hands a tensor's memory to another "
                                              "library; the values must be computed by the kernel's own @triton.jit "
                                              "launches")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        # naming a forbidden builtin without calling it (s = setattr; s(...)) hides the call from this check
        if (isinstance(node.ctx, ast.Load) and node.id in FORBIDDEN_BUILTINS and node.id not in self.bound
                and id(node) not in self.call_heads):  # a call of it is visit_Call's
            self.add("forbidden_call", node, f"refers to '{node.id}', which a kernel does not need")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            if self.resolve(base) in TENSOR_CLASSES:
                self.add("tensor_subclass", node, f"class {node.name} derives from {self.resolve(base)}; "
                                                  + SUBCLASS_ADVICE)
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in SUBCLASS_HOOKS:
                self.add("tensor_subclass", item, f"class {node.name} defines {item.name}; " + SUBCLASS_ADVICE)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = self.resolve(node.func)
        if isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_BUILTINS and node.func.id not in self.aliases:
            self.add("forbidden_call", node, f"calls '{node.func.id}()', which a kernel does not need")
        elif name in FORBIDDEN_ATTR_CALLS:
            self.add("forbidden_call", node, f"calls '{name}()', which a kernel does not need")
        elif name in GLOBAL_STATE_CALLS:
            self.add("tampering", node, f"calls '{name}()', which changes torch's global state (the reference and "
                                        "the timing share it); a kernel must leave it as it found it")
        elif name in LIBRARY_CALLS and _names_aten(node):
            self.add("tampering", node, f"calls '{name}()' on the aten namespace: a kernel must not register "
                                        "implementations of aten operators (the reference runs on them)")
        elif name == "getattr" and len(node.args) >= 2:
            attr = node.args[1]
            if isinstance(attr, ast.Constant) and isinstance(attr.value, str) and attr.value not in INTROSPECTION_ATTRS:
                # getattr(torch.cuda, "Stream") is checked as torch.cuda.Stream
                spelled = ast.Attribute(value=node.args[0], attr=attr.value, ctx=ast.Load())
                self.visit_Attribute(ast.copy_location(spelled, node))
            else:
                self.add("introspection", node, "calls getattr() with a computed or forbidden attribute name; "
                                                "write the attribute out")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_patch(target, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_patch(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_patch(target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_patch(node.target, node)
        self.generic_visit(node)

    def _check_patch(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._check_patch(element, node)
            return
        if not isinstance(target, ast.Attribute):
            return
        if target.attr == "__class__":
            self.add("tampering", node, "assigns to '__class__'; changing an object's class is not allowed")
            return
        root = _dotted(target)
        head = root.split(".")[0] if root else None
        if head is not None and (head in self.aliases or head in PATCH_ROOTS):
            name = self.resolve(target)
            self.add("tampering", node, f"assigns to '{name}', an attribute of the imported "
                                        f"'{self.aliases.get(head, head)}'; monkeypatching a module (torch, triton, "
                                        "the timers, the standard library) or what it exports is not allowed")

    def visit_Try(self, node: ast.Try) -> None:
        fallback_nodes = [*node.handlers, *node.orelse, *node.finalbody]
        for part in fallback_nodes:
            for inner in ast.walk(part):
                if isinstance(inner, ast.Call):
                    name = self.resolve(inner.func)
                    if name and _is_torch_compute(name):
                        self.add("torch_fallback", inner,
                                 f"falls back to PyTorch compute '{name}' inside try/except; "
                                 "a failing kernel must fail, not fall back")
        self.generic_visit(node)

    visit_TryStar = visit_Try  # type: ignore[assignment]  # the same fields as a Try


SUBCLASS_ADVICE = ("a kernel returns plain torch.Tensor objects; a tensor subclass runs its own code whenever "
                   "torch touches the result")


def _names_aten(node: ast.Call) -> bool:
    """The call's first argument (or ``ns``/``qualname``) is a string naming the aten namespace."""
    values = list(node.args[:1]) + [k.value for k in node.keywords if k.arg in ("ns", "qualname", "op")]
    return any(isinstance(v, ast.Constant) and isinstance(v.value, str)
               and v.value.split("::")[0].split(".")[0] == "aten" for v in values)


def _is_torch_compute(name: str) -> bool:
    parts = name.split(".")
    if parts[0] != "torch" or len(parts) < 2:
        return False
    if parts[1] in ("ops", "nn", "_C", "special", "linalg", "fft"):
        return True
    if parts[1] == "cuda":
        return False
    return parts[1] not in TORCH_NON_COMPUTE and not parts[1][:1].isupper() and len(parts) == 2


def check_source(source: str, dsl: Dsl = TRITON) -> list[dict]:
    """Findings for the candidate's source, asked in the kernel language ``dsl``; a syntax error
    yields none (the import step reports it)."""
    try:
        tree = parse(source)
    except SyntaxError:
        return []
    checker = _Checker(tree)
    checker.visit(tree)
    unwritten = dsl.unwritten(tree, checker.resolve)
    if unwritten:
        checker.findings.append({"guard": "wrong_dsl", "line": None, "message": unwritten})
    seen, unique = set(), []
    for finding in checker.findings:
        key = (finding["guard"], finding["line"])
        if key not in seen:
            seen.add(key)
            unique.append(finding)
    return unique
