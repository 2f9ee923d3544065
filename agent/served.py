"""Accepted kernels and the overloads each one serves: listing, lookup, loading (``agent.enable``
registers them with torch).

``generated_kernels/<op>/meta.json`` names the overload the kernel is written for
(``written_for``) and every overload it serves (``serves``): for a functional kernel, its
in-place and out= siblings too, through ``harness.adapters``. Folders accepted before
variants were served hold only ``op``: they serve that overload alone.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Callable

from agent.review.lifecycle import upgraded


def accepted(root: str | Path) -> list[dict]:
    """One entry per accepted kernel: op, dir, kernel file, written_for, serves, and the rest of meta.json."""
    entries = []
    for meta_file in sorted((Path(root) / "generated_kernels").glob("*/meta.json")):
        try:
            meta = upgraded(json.loads(meta_file.read_text()))
        except (OSError, json.JSONDecodeError):
            continue  # not a folder bbagent wrote
        written_for = meta.get("written_for") or meta.get("op") or meta_file.parent.name
        entries.append({**meta, "op": meta.get("op", written_for), "written_for": written_for,
                        "serves": meta.get("serves") or [written_for], "dir": str(meta_file.parent),
                        "kernel": str(meta_file.parent / "kernel.py")})
    return entries


def written_for_beside(kernel: Path) -> str | None:
    """``written_for`` from the meta.json of an accepted kernel's folder, if the file sits in one."""
    try:
        meta = json.loads((kernel.parent / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    return meta.get("written_for") if isinstance(meta, dict) else None


def kernel_serving(root: str | Path, op: str) -> dict | None:
    """The accepted kernel that serves ``op`` (its ``accepted`` entry), or None."""
    return next((entry for entry in accepted(root) if op in entry["serves"]), None)


def load(root: str | Path, op: str) -> Callable:
    """A callable with ``op``'s calling convention, from the accepted kernel that serves it.
    Imports the kernel module into this process: use it where the kernel is trusted (reviewed)."""
    from harness.adapters import serving
    from harness.ops import resolve_op
    entry = kernel_serving(root, op)
    if entry is None:
        raise LookupError(f"no accepted kernel serves {op} under {Path(root) / 'generated_kernels'}: "
                          f"run 'bbagent generate --op {op}' first")
    return serving(import_kernel(entry["kernel"], Path(entry["dir"]).name), resolve_op(entry["written_for"]),
                   resolve_op(op))


def import_kernel(path: str | Path, name: str) -> Callable:
    """The ``kernel`` of the module at ``path``, imported under a module name made from ``name``;
    LookupError where the module defines no callable ``kernel``."""
    spec = importlib.util.spec_from_file_location("bbagent_kernel_" + name.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = getattr(module, "kernel", None)
    if not callable(kernel):
        raise LookupError(f"{path} defines no kernel(...)")
    return kernel
