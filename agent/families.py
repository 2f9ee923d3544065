"""Which prompt family an aten overload belongs to, and where the prompt templates are.

The family (``prompts/families.json``: explicit lists, then rules on names and tags) picks the
prompt template, the worked example and the traps; it also groups operators in listings
(``bbagent ops``, ``review list``) and says which operators a channels-last run applies to.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

import torch

from bbagent.harness.interface import out_arguments, overloads


def _prompts_dir() -> Path:
    """The templates: the package data of ``bbagent.agent.prompts`` in an installed wheel, else the
    checkout's ``prompts/`` beside the ``agent`` package (a checkout or an editable install)."""
    installed = Path(str(resources.files("bbagent.agent") / "prompts"))
    return installed if (installed / "base.j2").is_file() else Path(__file__).resolve().parent.parent / "prompts"


PROMPTS_DIR = _prompts_dir()


@lru_cache(maxsize=1)
def family_map() -> dict:
    return json.loads((PROMPTS_DIR / "families.json").read_text())


def families() -> set[str]:
    """The prompt families: one template each under ``prompts/families/``."""
    return {p.stem for p in (PROMPTS_DIR / "families").glob("*.j2")}


def base_name(op: str) -> str:
    """``add`` for aten.add.Tensor, aten.add_.Tensor and aten.add.out: the family lookup key."""
    name = op.split(".")[1] if op.count(".") >= 2 else op
    return name if name.startswith("__") else name.rstrip("_")


def family_of(op: str) -> str:
    """The op's prompt family from ``prompts/families.json`` (explicit lists, then rules)."""
    mapping = family_map()
    base = base_name(op)
    for family, names in mapping["ops"].items():
        if base in names:
            return family
    overloads = _overloads_of(base)
    for rule in mapping["rules"]:
        if _rule_matches(rule, base, overloads):
            return rule["family"]
    return "generic"


@lru_cache(maxsize=None)
def _overloads_of(base: str) -> tuple:
    """Every overload of the functional operator and its in-place twin: tags such as
    ``pointwise`` sit on some overloads only (``relu.default`` has it, ``relu.out`` not)."""
    return tuple(overloads(base) + overloads(base + "_"))


def _rule_matches(rule: dict, base: str, overloads: tuple) -> bool:
    if "name_contains" in rule and rule["name_contains"] not in base:
        return False
    if "name_prefix" in rule and not base.startswith(tuple(rule["name_prefix"])):
        return False
    if "name_suffix" in rule and not base.endswith(rule["name_suffix"]):
        return False
    if "tag" in rule and not any(getattr(torch.Tag, rule["tag"]) in o.tags for o in overloads):
        return False
    if rule.get("binary") and not any(_is_binary(o) for o in overloads):
        return False
    return True


def _is_binary(overload) -> bool:
    """Two tensor inputs (an ``out=`` tensor does not count) or an ``other`` argument."""
    arguments, outs = overload._schema.arguments, set(out_arguments(overload))
    tensors = [a for a in arguments if "Tensor" in str(a.type) and a.name not in outs]
    return len(tensors) >= 2 or any(a.name == "other" for a in arguments)
