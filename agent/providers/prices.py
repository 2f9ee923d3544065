"""What a model's tokens cost, and how a cost reads where one may be unknown.

The shipped ``prices.json`` (published list prices, USD per million input and output tokens) is
overlaid by the user's own file: ``$BBAGENT_PRICES`` where it names one, else
``~/.config/bbagent/prices.json`` where it exists (same format; your contract's prices, a local
model's 0, a model not shipped). Nothing inside the installed package needs editing. A model is
priced by its exact name, else by the longest listed name it starts with. A model with no price
has no cost: the dollars spent are then a lower bound, and every surface says so
(``agent.money.cost_text``).
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

from bbagent.agent.errors import UsageError

PRICES_FILE = Path(__file__).resolve().parent / "prices.json"
USER_PRICES = Path("~/.config/bbagent/prices.json")
PRICES_VARIABLE = "BBAGENT_PRICES"


def user_prices_file() -> Path | None:
    """The user's prices file, or None where there is none."""
    named = os.environ.get(PRICES_VARIABLE)
    if named:
        return Path(named).expanduser()
    default = USER_PRICES.expanduser()
    return default if default.is_file() else None


def _read(path: Path, what: str) -> dict[str, tuple[float, float]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{what} {path} cannot be read ({getattr(exc, 'strerror', None) or exc}); it holds a JSON "
                         'object of model name -> [USD per million input tokens, per million output tokens]') from None
    if not isinstance(data, dict):
        raise UsageError(f"{what} {path} must hold a JSON object of model name -> [input, output] USD per million")
    prices = {}
    for model, price in data.items():
        if model.startswith("_"):
            continue  # a comment
        if (not isinstance(price, list) or len(price) != 2
                or not all(isinstance(p, (int, float)) and not isinstance(p, bool) and p >= 0 for p in price)):
            raise UsageError(f"{what} {path}: the price of '{model}' must be [input, output], two numbers >= 0 "
                             f"(USD per million tokens), not {json.dumps(price)}")
        prices[model] = (float(price[0]), float(price[1]))
    return prices


@lru_cache(maxsize=4)
def _prices(user_file: str | None, stamp: tuple = ()) -> dict[str, tuple[float, float]]:
    """The prices; ``stamp`` (the user file's modification time and size) reads an edited file again."""
    prices = _read(PRICES_FILE, "the shipped prices file")
    if user_file is not None:
        prices.update(_read(Path(user_file), f"the prices file (${PRICES_VARIABLE} or {USER_PRICES})"))
    return prices


def price_of(model: str) -> tuple[float, float] | None:
    """(USD per million input tokens, per million output tokens), or None if not listed."""
    user = user_prices_file()
    try:
        stamp: tuple[object, ...] = (user.stat().st_mtime_ns, user.stat().st_size) if user is not None else ()
    except OSError:
        stamp = ("missing",)  # read (and refused, with the reason) below
    prices = _prices(str(user) if user is not None else None, stamp)
    if model in prices:
        return prices[model]
    prefixes = [name for name in prices if model.startswith(name)]
    return prices[max(prefixes, key=len)] if prefixes else None


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float | None:
    price = price_of(model)
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1e6


def where_prices_go() -> str:
    return (f"add it to {USER_PRICES} or to the file ${PRICES_VARIABLE} names (a JSON object: model name -> "
            "[USD per million input tokens, per million output tokens])")
