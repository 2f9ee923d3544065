"""Approved kernels shipped without bbagent (``bbagent export --package / --hf-kernels /
--backendbench``).

``--package DIR --name NAME`` writes a Python project whose package ``NAME`` serves the approved
kernels with torch and triton alone (``harness.packaged`` is its loader; it and the modules it
needs are copied from bbagent, their imports made relative), and builds its wheel into
``DIR/dist``. Each kernel travels with its digest (the approval pin), its speedups (the speed
gate), the Verdict it was approved with, the stack and card it was judged on, and its self-test:
inputs of its own tests (OpInfo samples and edge cases, small ones), saved with ``torch.save``.

``--hf-kernels DIR`` writes the same package as a universal (pure Python and Triton) build variant
of the Hugging Face ``kernels`` library (``DIR/build/torch-universal``, its ``metadata.json``
naming it), loadable with ``kernels.get_local_kernel(DIR)``.

``--backendbench DIR`` writes BackendBench's ``DirectoryBackend`` layout: one folder per overload
(``relu__default``), holding ``<folder>_implementation_v<N>.py``: the kernel file with
``<folder>_kernel_impl`` added, which that loader registers for that overload alone. Only the
overload a kernel is written for goes there: the in-place and out= ones bbagent serves through its
adapters would need bbagent's code in the file, so they are left out, with why.

Every export writes ``bbagent_export.json`` beside what it wrote: each file's origin, version,
digest and Verdict, and each kernel left out with why. Only approved kernels unless
``include_unreviewed`` (the current one unless rejected); an approved file modified since its
approval is left out.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import keyword
import re
import shutil
import time
import json
import zipfile
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

import torch

from bbagent.agent.errors import UsageError
from bbagent.agent.review.catalog import catalogue
from bbagent.agent.review.export import MANIFEST, why_not_exported
from bbagent.agent.storage import write_atomic, write_json
from bbagent.harness.interface import (CONFIGS_FILE, DSLS, PACKAGE_MANIFEST, Manifest, PackagedKernel, Stack, build_suite,
                                       file_sha256, resolve_op)

# bbagent's modules an exported package carries, by the name they have in its _runtime folder
CARRIED = {"bbagent.harness.packaged": "packaged", "bbagent.harness.adapters": "adapters",
           "bbagent.harness.plain": "plain", "bbagent.harness.ops": "ops", "bbagent.harness.variants": "variants",
           "bbagent.harness.inputs": "inputs", "bbagent.harness.traces": "traces", "bbagent.harness.parse": "parse",
           "bbagent.harness.overriding": "overriding", "bbagent.harness.kernel_import": "kernel_import",
           "bbagent.harness.checks.reference": "reference", "bbagent.harness.checks.compare": "compare",
           "bbagent.harness.checks.policy": "policy", "bbagent.harness.launches": "launches",
           "bbagent.harness.helion_configs": "helion_configs"}
SELF_TEST_CASES = 12
SELF_TEST_MAX_NUMEL = 1 << 12
_IMPORT = re.compile(r"^(\s*)from (bbagent(?:\.\w+)+) import", re.M)


def package_name(name: str) -> str:
    """``name`` checked to be a Python package name (an identifier, not a keyword)."""
    if not name.isidentifier() or keyword.iskeyword(name) or not name.isascii():
        raise UsageError(f"--name {name!r} is not a Python identifier: the package is imported by that name "
                         "(letters, digits and _, not starting with a digit)")
    return name


def export_package(root: Path, out_dir: Path, name: str, include_unreviewed: bool = False,
                   version: str = "0.1.0") -> dict:
    """Write the project of package ``name`` into ``out_dir`` and its wheel into ``out_dir/dist``."""
    name = package_name(name)
    chosen, left_out = _chosen(root, include_unreviewed)
    _writable(out_dir)
    tree = out_dir / name
    manifest = _write_tree(tree, name, chosen, left_out)
    needs = ["torch", "triton", *languages_needed(manifest)]
    write_atomic(out_dir / "pyproject.toml", _pyproject(name, version, needs))
    write_atomic(out_dir / "README.md", _readme(name, manifest))
    wheel = build_wheel(tree, out_dir / "dist", name, version, needs)
    rows = [_row(kernel, f"{name}/kernels/{kernel.folder}/{kernel.file}") for kernel in manifest.kernels]
    return _finish(out_dir, rows, left_out, {"package": name, "wheel": str(wheel)})


def export_hf_kernels(root: Path, out_dir: Path, name: str, include_unreviewed: bool = False) -> dict:
    """Write package ``name`` as the ``kernels`` library's universal build variant under ``out_dir``."""
    name = package_name(name)
    if not re.fullmatch(r"[a-z][a-z0-9_]*[a-z0-9]", name):
        raise UsageError(f"--name {name!r}: the kernels library wants a kernel name of at least 2 lowercase "
                         "letters, digits and _ (written - in its metadata), starting with a letter and not ending with _")
    chosen, left_out = _chosen(root, include_unreviewed)
    _writable(out_dir)
    variant = out_dir / "build" / "torch-universal"
    manifest = _write_tree(variant, name, chosen, left_out, also=name)  # the copy in NAME/: older loaders
    digest = hashlib.sha256(manifest.to_json().encode()).hexdigest()[:10]
    write_json(variant / "metadata.json", {"name": name.replace("_", "-"), "id": f"_{name}_universal_{digest}", "version": 1,
                                           "license": "unknown", "python-depends": languages_needed(manifest),
                                           "backend": {"type": "cuda"}})
    write_atomic(out_dir / "README.md", _readme(name, manifest))
    rows = [_row(kernel, f"build/torch-universal/kernels/{kernel.folder}/{kernel.file}") for kernel in manifest.kernels]
    return _finish(out_dir, rows, left_out, {"package": name, "variant": str(variant)})


def export_backendbench(root: Path, out_dir: Path, include_unreviewed: bool = False) -> dict:
    """Write each approved kernel's own overload in BackendBench's DirectoryBackend layout."""
    chosen, left_out = _chosen(root, include_unreviewed)
    _writable(out_dir)
    rows = []
    for version, kernel in chosen:
        overload = resolve_op(kernel.written_for)
        folder = _backendbench_folder(overload)
        target = out_dir / folder / f"{folder}_implementation_v{version.number}.py"
        for stale in (out_dir / folder).glob(f"{folder}_implementation*.py"):
            stale.unlink()  # the loader takes the first file by name: only this one may be there
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, version.kernel.read_text() + _backendbench_entry(folder))
        rows.append({**_row(kernel, str(target.relative_to(out_dir))), "overload": kernel.written_for,
                     "file_sha256": file_sha256(target)})
        left_out += [{"kernel": kernel.key, "overload": op,
                      "why": "served through bbagent's in-place or out= adapter, which BackendBench's loader does "
                             "not carry (it calls the file's function as the overload itself)"}
                     for op in kernel.serves if op != kernel.written_for]
    return _finish(out_dir, rows, left_out, {})


def _chosen(root: Path, include_unreviewed: bool) -> tuple[list, list[dict]]:
    """(version, PackagedKernel without its self-test) of every operator kernel to export, and
    every kernel left out with why."""
    chosen, left_out = [], []
    kernels, wrecks = catalogue(root)
    for entry in kernels:
        version = entry.served(include_unreviewed)
        why = why_not_exported(version, entry, include_unreviewed)
        if why is None and version is not None and not version.overloads:
            why = ("an answer to a program or region problem: export --kernelbench writes program answers; region "
                   "answers are not packaged")
        if why is not None or version is None:
            left_out.append({"kernel": entry.op, "why": why})
            continue
        chosen.append((version, _packaged(version)))
    left_out += [{"kernel": wreck.folder.name, "why": f"its folder is broken: {wreck.reason}"} for wreck in wrecks]
    if not chosen:
        said = "; ".join(f"{row['kernel']}: {row['why']}" for row in left_out)
        hint = "" if include_unreviewed or not said or "--include-unreviewed" in said else \
            " (only approved kernels are exported: bbagent review approve OP, or --include-unreviewed)"
        raise UsageError(f"no kernel to export: {said or 'no accepted kernel under ' + str(Path(root) / 'generated_kernels')}"
                         f"{hint}")
    return chosen, left_out


def _packaged(version) -> PackagedKernel:
    meta = version.meta
    configs = version.folder / CONFIGS_FILE
    tests = meta.tests.model_dump() if meta.tests is not None else {}
    summary = meta.summary.model_dump() if meta.summary is not None else {}
    return PackagedKernel(
        key=meta.op, folder=re.sub(r"\W", "_", meta.op), file=version.kernel.name, version=version.number,
        status=version.status, sha256=file_sha256(version.kernel), written_for=meta.written_for,
        serves=list(version.overloads), dtypes=list(meta.dtypes), speedups=meta.overload_speeds(),
        over_inductor=meta.performance.speedup_over("inductor"),
        verdict={"tests": tests, "summary": summary, "accepted_at": meta.accepted_at},
        judged_on=Stack(torch=meta.versions.torch or "", triton=meta.versions.triton or "",
                        device=meta.device or "cpu", gpu=meta.gpu),
        selftest=None, origin={"run_id": meta.run_id, "provider": meta.provider, "model": meta.model,
                               "folder": str(version.folder)}, dsl=meta.dsl,
        configs_sha256=file_sha256(configs) if configs.is_file() else None)


def _write_tree(tree: Path, name: str, chosen: list, left_out: list[dict], also: str | None = None) -> Manifest:
    """The package ``name`` in ``tree`` (written beside it, then put in its place: an export that
    fails leaves the one before): its kernels, their self-tests, the loader and the manifest;
    ``also``: a copy of it in ``tree/also``."""
    final, tree = tree, tree.with_name(f".{tree.name}.partial")
    if tree.exists():
        shutil.rmtree(tree)
    kernels = []
    for version, kernel in chosen:
        target = tree / "kernels" / kernel.folder
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(version.kernel, target / kernel.file)
        if kernel.configs_sha256 is not None:  # a Helion kernel's tuned configs, pinned where it is imported
            shutil.copyfile(version.folder / CONFIGS_FILE, target / CONFIGS_FILE)
        saved = _self_test_inputs(kernel)
        if saved is not None:
            (tree / "selftest").mkdir(exist_ok=True)
            (tree / "selftest" / f"{kernel.folder}.pt").write_bytes(saved)
            kernel.selftest = f"{kernel.folder}.pt"
        kernels.append(kernel)
    runtime = tree / "_runtime"
    runtime.mkdir(parents=True, exist_ok=True)
    write_atomic(runtime / "__init__.py", '"""The loader, copied from bbagent (harness.packaged and what it imports)."""\n')
    for module, carried in CARRIED.items():
        write_atomic(runtime / f"{carried}.py", carried_source(module))
    manifest = Manifest(name=name, kernels=kernels, exported_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                        exported_by=_bbagent_version(), left_out=left_out)
    write_atomic(tree / PACKAGE_MANIFEST, manifest.to_json())
    write_atomic(tree / "__init__.py", _init(name))
    write_atomic(tree / "__main__.py", _main(name))
    if also is not None:
        shutil.copytree(tree, tree / also)
    if final.exists():
        shutil.rmtree(final)
    tree.replace(final)
    return manifest


def carried_source(module: str) -> str:
    """The text of bbagent's ``module`` with its imports of bbagent made imports of the package's
    copies; refuses (a bug of bbagent's) one importing bbagent's code the package does not carry."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"bbagent's module {module} is missing")
    text = Path(spec.origin).read_text(encoding="utf-8")

    def relative(match: re.Match) -> str:
        if match.group(2) not in CARRIED:
            raise RuntimeError(f"{module} imports {match.group(2)}, which an exported package does not carry")
        return f"{match.group(1)}from .{CARRIED[match.group(2)]} import"
    text = _IMPORT.sub(relative, text)
    if re.search(r"^\s*import bbagent\b", text, re.M):
        raise RuntimeError(f"{module} imports bbagent itself, which an exported package does not carry")
    return text


def _self_test_inputs(kernel: PackagedKernel) -> bytes | None:
    """The saved inputs of up to ``SELF_TEST_CASES`` small tests of the kernel's own overload (of the
    dtypes it was tested on), or None where none can be saved."""
    overload = resolve_op(kernel.written_for)
    try:
        suite = build_suite(overload, "cpu", 0, interpreter=True)
    except Exception:  # noqa: BLE001 - no tests here: the package says its kernel has no self-test
        return None
    cases: list[dict] = []
    for case in suite.cases:
        if len(cases) >= SELF_TEST_CASES:
            break
        if case.args is None or case.dtype not in kernel.dtypes:
            continue
        if case.largest_tensor() > SELF_TEST_MAX_NUMEL:
            continue
        args, kwargs = case.inputs()
        row = {"id": case.id, "args": args, "kwargs": kwargs}
        if _saves(row):
            cases.append(row)
    if not cases:
        return None
    buffer = io.BytesIO()
    torch.save({"op": kernel.written_for, "cases": cases}, buffer)
    return buffer.getvalue()


def _saves(row: dict) -> bool:
    """Whether ``row`` comes back from ``torch.save`` through ``torch.load(weights_only=True)``."""
    buffer = io.BytesIO()
    try:
        torch.save(row, buffer)
        buffer.seek(0)
        torch.load(buffer, weights_only=True)
    except Exception:  # noqa: BLE001 - a value the safe loader refuses: the case is not kept
        return False
    return True


def languages_needed(manifest: Manifest) -> list[str]:
    """What the package needs installed besides torch and triton: the package of every other kernel
    language its kernels are written in (Helion's kernels import helion)."""
    return sorted({DSLS[k.dsl].package for k in manifest.kernels} - {"torch", "triton"})


def build_wheel(tree: Path, dist: Path, name: str, version: str, needs: list[str]) -> Path:
    """A pure-Python wheel of the package in ``tree`` (PEP 427), written into ``dist``; ``needs``:
    its requirements."""
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/{path.relative_to(tree).as_posix()}": path.read_bytes()
             for path in sorted(tree.rglob("*")) if path.is_file() and "__pycache__" not in path.parts}
    files[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 "Summary: Triton kernels approved with bbagent\nRequires-Python: >=3.10\n"
                                 + "".join(f"Requires-Dist: {need}\n" for need in needs)).encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: bbagent\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = [f"{path},sha256={_digest(data)},{len(data)}" for path, data in files.items()]
    files[f"{info}/RECORD"] = ("\n".join(record + [f"{info}/RECORD,,"]) + "\n").encode()
    dist.mkdir(parents=True, exist_ok=True)
    wheel = dist / f"{name}-{version}-py3-none-any.whl"
    temporary = wheel.with_name(wheel.name + ".part")
    with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            archive.writestr(zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0)), data)
    temporary.replace(wheel)
    return wheel


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _row(kernel: PackagedKernel, file: str) -> dict:
    return {"file": file, "kernel": kernel.key, "version": kernel.version, "status": kernel.status,
            "sha256": kernel.sha256, "serves": kernel.serves, "speedups": kernel.speedups,
            "over_inductor": kernel.over_inductor, "verdict": kernel.verdict,
            "judged_on": asdict(kernel.judged_on), "origin": kernel.origin}


def _finish(out_dir: Path, rows: list[dict], left_out: list[dict], extra: dict) -> dict:
    manifest = out_dir / MANIFEST
    write_json(manifest, {"written": rows, "left_out": left_out, **extra})
    return {"written": rows, "left_out": left_out, "manifest": str(manifest), **extra}


def _writable(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir} is not a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".bbagent-write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"cannot write into {out_dir}: {exc.strerror or exc}") from None


def _backendbench_folder(overload) -> str:
    """BackendBench's folder for an overload: ``name.overload`` with the dot as ``__``."""
    return f"{overload._schema.name.split('::')[-1]}__{overload._overloadname}"


def _backendbench_entry(folder: str) -> str:
    return (f"\n\n# Added by bbagent export --backendbench: the function BackendBench's DirectoryBackend registers.\n"
            f"def {folder}_kernel_impl(*args, **kwargs):\n    return kernel(*args, **kwargs)\n")


def _bbagent_version() -> str:
    try:
        return f"bbagent {metadata.version('bbagent')}"
    except metadata.PackageNotFoundError:
        return "bbagent"


def _init(name: str) -> str:
    return f'''"""{name}: Triton kernels approved with bbagent, served with torch and triton alone.

    import {name}
    {name}.enable()              # serve them (a context manager too: with {name}.enable(): ...)
    {name}.disable()             # give aten its kernels back
    {name}.kernels()             # each kernel: digest, Verdict, the stack and card it was judged on
    {name}.check()               # each kernel's self-test on this machine (python -m {name} check)

A kernel judged on another stack or card is served only after its self-test passed here
(enable(check=True) runs it first), or with enable(trust=True).
"""
from pathlib import Path as _Path

from ._runtime.packaged import Package as _Package
from ._runtime.packaged import PackageError

_PACKAGE = _Package({name!r}, _Path(__file__).parent)
enable = _PACKAGE.enable
disable = _PACKAGE.disable
kernels = _PACKAGE.kernels
check = _PACKAGE.check
__all__ = ["enable", "disable", "kernels", "check", "PackageError"]
'''


def _main(name: str) -> str:
    return f'''"""python -m {name} list | check [--device cpu|cuda] [--json]: the kernels, or their self-tests here.
Exit 0 (every self-test passed), 1 (one failed), 2 (usage)."""
import argparse
import json
import sys
from dataclasses import asdict

from . import PackageError, check, kernels


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m {name}")
    parser.add_argument("command", choices=["list", "check"])
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "list":
        rows = kernels()
        for row in rows if not args.json else []:
            judged = row["judged_on"]
            print(f"{{row['key']}} v{{row['version']}} {{row['status']}} sha256 {{row['sha256'][:12]}} serves "
                  f"{{', '.join(row['serves'])}}; judged on torch {{judged['torch']}}, triton {{judged['triton']}}, "
                  f"{{judged['gpu'] or judged['device']}}")
        if args.json:
            print(json.dumps(rows, indent=1))
        return 0
    try:
        results = check(args.device)
    except PackageError as exc:
        print(f"python -m {name}: {{exc}}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([asdict(result) for result in results], indent=1))
    for result in results if not args.json else []:
        said = f"passed {{result.cases}} cases" if result.passed else f"FAILED: {{result.failure}}"
        print(f"{{result.key}}: {{said}}")
    return 0 if all(result.passed for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
'''


def _pyproject(name: str, version: str, needs: list[str]) -> str:
    return f'''[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "{version}"
description = "Triton kernels approved with bbagent"
requires-python = ">=3.10"
dependencies = {json.dumps(needs)}

[tool.setuptools]
packages = ["{name}", "{name}._runtime"]

[tool.setuptools.package-data]
{name} = ["manifest.json", "selftest/*.pt", "kernels/*/*.py"]
'''


def _readme(name: str, manifest: Manifest) -> str:
    lines = [f"# {name}", "", "Triton kernels approved with bbagent, served with torch and triton alone.", "",
             f"    pip install dist/{name}-*.whl", f"    python -c \"import {name}; {name}.enable()\"",
             f"    python -m {name} check   # each kernel's self-test on this machine", "", "| kernel | version | "
             "status | sha256 | judged on |", "|---|---|---|---|---|"]
    lines += [f"| {k.key} | {k.version} | {k.status} | {k.sha256[:12]} | {k.judged_on.said()} |" for k in manifest.kernels]
    return "\n".join(lines) + "\n"
