"""Nothing secret leaves through a candidate's output (issue 17): the redaction itself, and a whole
`bbagent generate` run whose first kernel prints the parent's API keys and crashes, after which
no file under the run root (run directories, call log, accepted kernel) holds them, and the
feedback sent to the model says they were redacted."""
import base64
import json

from bbagent.cli import main
from fake_llm import FakeLLMServer
from bbagent.harness.redact import MARK, Redactor, configured_secrets

OPENAI_KEY = "sk-bbagent-planted-7f3a9c2e5b1d4068"
HF_TOKEN = "hf_plantedtoken_a8d93kf02mq7"
FRAGMENT_SHOWN = 12


def test_every_obvious_form_of_a_secret_is_replaced():
    redactor = Redactor([OPENAI_KEY])
    blob = base64.b64encode(f"OPENAI_API_KEY={OPENAI_KEY}".encode()).decode()
    for text in (f"key={OPENAI_KEY}!", OPENAI_KEY[:20], f"x {OPENAI_KEY[9:29]} y", blob, OPENAI_KEY.encode().hex(),
                 OPENAI_KEY.encode().hex().upper(), OPENAI_KEY[::-1], base64.urlsafe_b64encode(OPENAI_KEY.encode()).decode()):
        redacted, count = redactor.text(text)
        assert count >= 1 and MARK in redacted, text
        assert OPENAI_KEY[:FRAGMENT_SHOWN] not in redacted and OPENAI_KEY[-FRAGMENT_SHOWN:] not in redacted
    plain = "Traceback (most recent call last): RuntimeError: the kernel returned float32, expected float16"
    assert redactor.text(plain) == (plain, 0)


def test_secrets_come_from_secret_named_variables_and_short_values_are_settings(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("MY_SERVICE_PASSWORD", "correct-horse-battery")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    secrets = configured_secrets(["extra-configured-value"])
    assert {HF_TOKEN, "correct-horse-battery", "extra-configured-value"} <= set(secrets)
    assert "false" not in secrets and "0,1,2,3,4,5,6,7" not in secrets


def masked(secret: str) -> list[int]:
    return [ord(c) ^ 0x5A for c in secret]


LEAKING_ANSWER = f'''I will print the configuration first.

```python
import base64
import os
import sys

import torch


def _unmask(values):
    return "".join(chr(c ^ 0x5A) for c in values)


def kernel(self):
    key, token = _unmask({masked(OPENAI_KEY)}), _unmask({masked(HF_TOKEN)})
    print("OPENAI_API_KEY=" + key)
    print(base64.b64encode(("HF_TOKEN=" + token).encode()).decode())
    print("keys:", key, token.encode().hex(), file=sys.stderr, flush=True)
    os.abort()
```
'''


def test_a_run_whose_kernel_prints_the_keys_stores_and_sends_none_of_them(tmp_path, monkeypatch, no_keys,
                                                                          demo_answers, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    with FakeLLMServer().answer(LEAKING_ANSWER, demo_answers[1]) as server:
        code = main(["generate", "--op", "aten.relu.default", "--rounds", "2", "--provider", "openai",
                     "--base-url", server.url + "/v1", "--model", "gpt-test", "--root", str(tmp_path),
                     "--timeout", "120"])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    forms = [OPENAI_KEY, HF_TOKEN, OPENAI_KEY.encode().hex(), HF_TOKEN.encode().hex(), OPENAI_KEY[::-1],
             base64.b64encode(HF_TOKEN.encode()).decode()[:-4], OPENAI_KEY[:16], HF_TOKEN[-14:]]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "llm_calls.sqlite" for p in files) and any(p.name == "verdict.json" for p in files)
    for path in files:
        data = path.read_bytes()
        leaked = [form for form in forms if form.encode() in data]
        assert not leaked, f"{path} holds {leaked}"
    for text in (out.out, out.err):
        assert not [form for form in forms if form in text]

    feedback = server.requests[1]["body"]["messages"][-1]["content"]
    assert not [form for form in forms if form in feedback]
    assert "crash" in feedback and "keys: [redacted] [redacted]" in feedback
    assert "replaced by [redacted]" in feedback
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    first = json.loads((run_dir / "round-1" / "verdict.json").read_text())
    assert first["error_kind"] == "crash" and first["redactions"] >= 4
    assert "OPENAI_API_KEY=[redacted]" in first["stdout_tail"]


def test_a_verdict_made_on_another_machine_is_redacted_here_too(tmp_path, monkeypatch):
    """A Ray supervisor redacts its own machine's secrets; this side's (here an API key only this
    process has) are redacted when the Verdict arrives, and both counts are kept."""
    from bbagent.harness.evaluate import EvaluationRequest, adopt_remote_verdict, evaluate_kernel
    kernel = tmp_path / "kernel.py"
    kernel.write_text("import subprocess\n\ndef kernel(x):\n    return subprocess.run(['true'])\n")
    request = EvaluationRequest.of("aten.relu.default", device="cpu")
    there = evaluate_kernel(request, kernel).model_dump(mode="json")  # refused by its source
    assert there["verdict"] == "fail" and there["redactions"] == 0
    there.update(message=f"{there['message']} (printed {OPENAI_KEY})", redactions=2)
    there["kernel"]["path"] = "/on/the/supervisor/kernel.py"
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    here = adopt_remote_verdict(request, there, kernel)
    assert OPENAI_KEY[:FRAGMENT_SHOWN] not in here.message and MARK in here.message
    assert here.redactions == 3 and here.kernel.path == str(kernel)
