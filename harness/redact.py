"""Secrets never leave through a candidate's output: every text of a Verdict is redacted in the
parent before the Verdict is stored or quoted in a prompt.

The secrets are the values of the parent's environment variables whose names say they hold one
(``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``HF_TOKEN``, ``*_SECRET*``, ``*PASSWORD*``, ...) and
any the caller names. The child never had them (its environment is an allowlist), but a
candidate may have learned one some other way (a file it should not have seen, the model's own
text); so each is looked for as it is, as any run of ``FRAGMENT`` or more of its characters (a
truncated or split key), and in the obvious encodings: hexadecimal, URL quoting, reversed, and
base64 (standard and URL-safe, at each of the three alignments a value can have inside a longer
encoded text). Each occurrence becomes ``[redacted]``.
"""
from __future__ import annotations

import base64
import os
import re
from urllib.parse import quote

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
MIN_LENGTH = 8  # shorter values ("false", "1") are settings, not secrets
FRAGMENT = 12
MARK = "[redacted]"


def configured_secrets(extra: list[str] | tuple = ()) -> list[str]:
    """The parent's secret values: secret-named environment variables, and ``extra``."""
    values = [value for name, value in os.environ.items() if SECRET_NAME.search(name)]
    values += [value for value in extra if value]
    return sorted({v.strip() for v in values if len(v.strip()) >= MIN_LENGTH}, key=len, reverse=True)


def _base64_cores(raw: bytes) -> set[str]:
    """The characters of base64 text that depend only on ``raw``, for each of the three
    offsets ``raw`` can start at inside a longer encoded value."""
    cores = set()
    for offset in range(3):
        total = offset + len(raw)
        determined = 4 * (total // 3) + {0: 0, 1: 1, 2: 2}[total % 3]
        skip = {0: 0, 1: 2, 2: 3}[offset]
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            core = encode(b"\0" * offset + raw).decode()[skip:determined]
            if len(core) >= FRAGMENT:
                cores.add(core)
    return cores


class Redactor:
    def __init__(self, secrets: list[str]):
        forms: set[str] = set()
        self.fragments: set[str] = set()
        for secret in secrets:
            raw = secret.encode()
            forms.update({secret, secret[::-1], raw.hex(), raw.hex().upper(), quote(secret, safe="")})
            forms.update(_base64_cores(raw))
            self.fragments.update(secret[i:i + FRAGMENT] for i in range(len(secret) - FRAGMENT + 1))
        longest_first = sorted((f for f in forms if len(f) >= MIN_LENGTH), key=len, reverse=True)
        self.pattern = re.compile("|".join(map(re.escape, longest_first))) if longest_first else None

    def text(self, text: str) -> tuple[str, int]:
        """``text`` with every secret form replaced; and how many replacements were made."""
        if self.pattern is None or not text:
            return text, 0
        text, count = self.pattern.subn(MARK, text)
        spans = self._fragment_spans(text)
        for start, end in reversed(spans):
            text = text[:start] + MARK + text[end:]
        return text, count + len(spans)

    def _fragment_spans(self, text: str) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        if not self.fragments:
            return spans
        for start in range(len(text) - FRAGMENT + 1):
            if text[start:start + FRAGMENT] in self.fragments:
                end = start + FRAGMENT
                if spans and start <= spans[-1][1]:
                    spans[-1] = (spans[-1][0], end)
                else:
                    spans.append((start, end))
        return spans

    def value(self, value):
        """``value`` (str, or dicts and lists of them) redacted; and the count of replacements."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            total, out = 0, {}
            for key, item in value.items():
                out[key], count = self.value(item)
                total += count
            return out, total
        if isinstance(value, (list, tuple)):
            total, out = 0, []
            for item in value:
                redacted, count = self.value(item)
                out.append(redacted)
                total += count
            return out, total
        return value, 0
