"""``bbagent check-model`` on the CPU with interpreter kernels: a tiny transformer built from a
config matches eager with approved relu and add kernels serving its calls; a wrong relu kernel
is named as the culprit by the bisection; resnet18 needs torchvision and says so."""
import importlib.util
import json
from pathlib import Path

import pytest

from bbagent.cli import main
from bbagent.agent.review import lifecycle
from tests.test_review import KERNELS, install, run_meta

TINY = ["--set", "batch=2", "--set", "seq=8", "--set", "d_model=32", "--set", "d_ff=64", "--set", "vocab=50",
        "--set", "activation=relu", "--set", "layers=1"]
RELU, ADD = "aten.relu.default", "aten.add.Tensor"


def approve(root, op: str, kernel: str, dtypes=("float32",)) -> None:
    """Approve ``kernel`` as tested here (so not stale here)."""
    install(root, op, (KERNELS / kernel).read_text(), run_meta(op, f"run-{op}", dtypes=list(dtypes)))
    lifecycle.set_status(root / "generated_kernels" / op, "approved")


def check(root, *extra) -> tuple[int, dict]:
    import io
    import contextlib
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["check-model", "--model", "transformer", "--device", "cpu", *TINY, "--root", str(root),
                     "--include-slower", "--repeats", "1", "--iterations", "1", "--json", *extra])
    return code, json.loads(buffer.getvalue())


def test_transformer_matches_eager_with_generated_kernels_serving_its_calls(tmp_path):
    approve(tmp_path, RELU, "relu_triton.py")
    approve(tmp_path, ADD, "add_broadcast.py")
    code, result = check(tmp_path)
    assert code == 0 and result["match"] and result["mismatches"] == 0
    assert result["served"][RELU]["calls"] == result["ops_run"][RELU] == 1
    assert result["served"][ADD]["calls"] == result["ops_run"][ADD] > 0
    assert result["timing"]["eager_ms"] > 0 and result["timing"]["enabled_ms"] > 0
    assert "aten.native_layer_norm.default" in result["ops_run"]
    assert "culprits" not in result


def test_a_wrong_kernel_is_found_by_bisection(tmp_path):
    approve(tmp_path, RELU, "relu_identity.py")        # copies its input: wrong for negatives
    approve(tmp_path, ADD, "add_broadcast.py")
    code, result = check(tmp_path)
    assert code == 1 and not result["match"]
    assert result["culprits"] == [[RELU]]
    first = result["first_mismatches"][0]
    assert first["eager"] != first["enabled"]


def test_check_model_usage_errors(tmp_path, capsys):
    assert main(["check-model", "--model", "transformer", "--device", "cpu", "--set", "width=3",
                 "--root", str(tmp_path)]) == 2
    assert "transformer has no setting width" in capsys.readouterr().err
    assert main(["check-model", "--model", "transformer", "--device", "cpu", "--set", "batch",
                 "--root", str(tmp_path)]) == 2
    assert "--set takes KEY=VALUE" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is not None,
                    reason="torchvision is installed here: resnet18 runs (its GPU twin is in test_gpu.py)")
def test_resnet18_without_torchvision_says_how_to_get_it(tmp_path, capsys):
    assert main(["check-model", "--model", "resnet18", "--device", "cpu", "--root", str(tmp_path)]) == 2
    assert "resnet18 needs torchvision" in capsys.readouterr().err


def test_nothing_served_is_not_a_match_and_says_why(tmp_path, capsys):
    """Issue 31: with only unreviewed kernels (or none) no call is served: its own status, exit 4,
    and the reason, never MATCH."""
    install(tmp_path, RELU, (KERNELS / "relu_triton.py").read_text(), run_meta(RELU, "run-relu"))  # not approved
    code, result = check(tmp_path)
    assert code == 4 and result["status"] == "nothing_served" and RELU in result["why_nothing_served"]
    (tmp_path / "empty").mkdir()
    assert main(["check-model", "--model", "transformer", "--device", "cpu", *TINY, "--root", str(tmp_path / "empty"),
                 "--repeats", "1", "--iterations", "1"]) == 4
    out = " ".join(capsys.readouterr().out.split())
    assert "NOTHING SERVED" in out and "MATCH" not in out.replace("NOTHING SERVED", "")
    assert "no accepted kernel serves any of the" in out


@pytest.mark.slow
def test_compiled_the_model_calls_the_approved_kernels_and_is_compared_and_timed_against_torch_compile(tmp_path, capsys):
    """``--compile``: the tiny transformer compiled alone and with the kernels; compiled code calls
    the approved relu once per forward, and add for the residuals; both compiled outputs match
    eager; the three runs are timed; a wrong relu under compile is a mismatch, exit 1."""
    approve(tmp_path, RELU, "relu_triton.py")
    approve(tmp_path, ADD, "add_broadcast.py")
    code, result = check(tmp_path, "--compile")
    compiled = result["compiled"]
    assert code == 0 and result["status"] == "match" and compiled["mode"] == "default", result
    assert compiled["compile_alone"]["match"] and compiled["compile_bbagent"]["match"]
    assert compiled["compiled_calls"][RELU] == 3 and compiled["compiled_calls"][ADD] >= 3  # three warm-up forwards
    assert compiled["kernels"][RELU]["under_compile"] == "served"
    timing = compiled["timing"]
    assert timing["eager_ms"] > 0 and timing["compile_ms"] > 0 and timing["bbagent_ms"] > 0
    assert len(timing["all_ms"]["eager"]) == 2 and len(timing["all_ms"]["bbagent"]) == 1  # bracketed
    main(["check-model", "--model", "transformer", "--device", "cpu", *TINY, "--root", str(tmp_path),
          "--include-slower", "--repeats", "1", "--iterations", "1", "--compile", "reduce-overhead"])
    out = " ".join(capsys.readouterr().out.split())
    assert "torch.compile mode reduce-overhead: MATCH" in out and "torch.compile + bbagent" in out
    assert f"{RELU} v1: 3 compiled call(s)" in out and "replays run no Python" in out
    wrong = tmp_path / "wrong"
    approve(wrong, RELU, "relu_identity.py")
    code, result = check(wrong, "--compile")
    assert code == 1 and result["status"] == "mismatch" and result["compiled"]["compile_alone"]["match"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused_at_once:
        main(["check-model", "--model", "transformer", "--device", "cpu", "--compile", "fast", "--root", str(tmp_path)])
    assert refused_at_once.value.code == 2
    refused = capsys.readouterr().err
    assert "--compile: invalid choice: 'fast'" in refused and "running" not in refused  # refused before the run


MODELS = Path(__file__).parent / "models"


def check_script(root, script: str, *extra) -> tuple[int, dict]:
    import io
    import contextlib
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["check-model", "--script", str(MODELS / script), "--device", "cpu", "--root", str(root),
                     "--include-slower", "--repeats", "1", "--iterations", "1", "--json", *extra])
    return code, json.loads(buffer.getvalue()) if buffer.getvalue().strip() else {}


def test_your_own_model_as_a_script_is_checked_and_bad_scripts_exit_2_with_the_fix(tmp_path, capsys):
    """``check-model --script``: a program in KernelBench's format is the model (its own inputs,
    its own sizes); the approved relu serves its one call and the output matches eager. A file that
    is not a program, a missing file, ``--set`` beside a script, and a dtype the model cannot run
    each exit 2 naming the fix, before any timing."""
    approve(tmp_path, RELU, "relu_triton.py")
    code, result = check_script(tmp_path, "relu_mlp.py")
    assert code == 0 and result["match"] and result["model"] == "relu_mlp", result
    assert result["script"] == str(MODELS / "relu_mlp.py") and result["served"][RELU]["calls"] == 1
    not_a_model = tmp_path / "notes.py"
    not_a_model.write_text("print('hello')\n")
    for argv, said in (([str(not_a_model)], "--script"), ([str(tmp_path / "missing.py")], "no such file"),
                       ([str(MODELS / "relu_mlp.py"), "--set", "batch=2"], "--set applies to a built-in --model"),
                       ([str(MODELS / "inverse_only_float32.py"), "--dtype", "float16"],
                        "does not run in float16 on cpu")):
        capsys.readouterr()
        assert main(["check-model", "--script", *argv[:1], "--device", "cpu", "--root", str(tmp_path), *argv[1:]]) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err, err
    assert "--dtype float32 runs every model" in err


@pytest.mark.slow
def test_training_steps_of_a_transformers_llama_with_the_kernels_match_eager(tmp_path, capsys):
    """``check-model --script tiny_llama.py --train``: Hugging Face transformers' Llama (random
    weights, two layers, grouped KV heads, RoPE, SwiGLU) trained two SGD steps eagerly, compiled
    alone and compiled with the approved add serving its residual and RoPE adds; the losses and
    the first step's gradients of both compiled runs match eager's; each run's time per step is
    measured; the table says so."""
    pytest.importorskip("transformers")
    approve(tmp_path, ADD, "add_broadcast.py")
    code, result = check_script(tmp_path, "tiny_llama.py", "--train", "--steps", "2", "--atol", "1e-4")
    compiled = result["compiled"]
    assert code == 0 and result["status"] == "match", result
    assert compiled["compile_alone"]["match"] and compiled["compile_bbagent"]["match"]
    assert compiled["compiled_calls"][ADD] > 0  # on the CPU, opaque calls into the interpreter's kernel
    losses = compiled["train"]["losses"]
    assert len(losses["eager"]) == 2 and losses["eager"][1] < losses["eager"][0]  # it trains
    assert all(compiled["timing"][f"{run}_ms"] > 0 for run in ("eager", "compile", "bbagent"))
    approve(tmp_path, RELU, "relu_triton.py")
    main(["check-model", "--script", str(MODELS / "relu_mlp.py"), "--device", "cpu", "--root", str(tmp_path),
          "--include-slower", "--train", "--steps", "2"])
    out = " ".join(capsys.readouterr().out.split())
    assert "2 training steps (SGD, lr 0.001)" in out and "ms per step" in out and "losses and first gradients" in out
