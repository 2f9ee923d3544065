"""benchmarks/sweep_variants.py: the versions it loads (settings keep their type), the inputs it reads,
and its refusals (no GPU, no such file, no such setting) without a traceback."""
import subprocess
import sys

import pytest

from conftest import ROOT, load_benchmark

SCRIPT = ROOT / "benchmarks" / "sweep_variants.py"


def test_a_version_is_a_kernel_file_with_its_settings_applied_in_their_own_type(tmp_path):
    sweep = load_benchmark("sweep_variants")
    version = tmp_path / "k.py"
    version.write_text("TILE, WIDE = 4096, False\n\ndef kernel(x):\n    return x * TILE\n")
    module = sweep.load_version(f"{version}:TILE=8192,WIDE=True", 0)
    assert module.TILE == 8192 and type(module.TILE) is int and module.WIDE is True
    with pytest.raises(sweep.WrongInput, match="no module-level 'NOPE'"):
        sweep.load_version(f"{version}:NOPE=1", 1)
    with pytest.raises(sweep.WrongInput, match="no kernel file"):
        sweep.load_version(str(tmp_path / "missing.py"), 2)


def test_an_output_is_checked_whole_the_second_tensor_too():
    import torch
    sweep = load_benchmark("sweep_variants")
    values, indices = torch.tensor([1.0, 2.0]), torch.tensor([0, 1])
    assert sweep.same((values, indices), (values + 1e-3, indices.clone()))
    assert not sweep.same((values, indices), (values, torch.tensor([1, 0])))  # pooling's indices, say
    assert not sweep.same((values, indices), (values,)) and not sweep.same(values, values[:1])


def test_inputs_come_from_a_file_or_the_operators_traces(tmp_path):
    from bbagent.harness.traces import parse_call_line
    sweep = load_benchmark("sweep_variants")
    given = tmp_path / "inputs.txt"
    given.write_text("# a comment\n(T([4096, 1024], f16), [0], True)\n\n")
    assert sweep.input_lines("aten.sum.dim_IntList", given, 12) == ["(T([4096, 1024], f16), [0], True)"]
    traced = sweep.input_lines("aten.sum.dim_IntList", None, 3)
    assert len(traced) == 3
    for line in traced:  # each reads back as the call it came from
        assert parse_call_line("aten.sum.dim_IntList", f"cnt: 1, ({line}, {{}})").args


def test_index_arguments_are_drawn_so_the_operator_accepts_them():
    import torch
    from bbagent.harness.ops import resolve_op
    from bbagent.harness.traces import parse_call_line
    sweep = load_benchmark("sweep_variants")
    call = parse_call_line("aten.index_select.default", "cnt: 1, ((T([4, 5, 3], f16), 1, T([64], i64)), {})")
    x, dim, index = sweep.draw_inputs(resolve_op("aten.index_select.default"), call, "cpu")
    assert index.shape == (64,) and int(index.min()) >= 0 and int(index.max()) < 5
    assert torch.index_select(x, dim, index).shape == (4, 64, 3)


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120)


def test_wrong_input_is_refused_in_words_before_any_gpu_is_needed(tmp_path, capsys):
    sweep = load_benchmark("sweep_variants")
    example = ROOT / "prompts" / "examples" / "reduction.py"
    broken = tmp_path / "broken.py"
    broken.write_text("import nothing_of_that_name\n")
    bad_line = tmp_path / "inputs.txt"
    bad_line.write_text("(T([4, 4], f16), [0]\n")
    for args, words in [(("aten.nope.default", example), "no operator 'aten.nope.default'"),
                        (("aten.sum.dim_IntList", broken), "does not import: ModuleNotFoundError"),
                        (("aten.sum.dim_IntList", example, "--inputs", tmp_path / "missing.txt"), "no inputs file"),
                        (("aten.sum.dim_IntList", example, "--inputs", bad_line), "not an input line")]:
        assert sweep.main([str(a) for a in args]) == 2
        assert words in capsys.readouterr().err, args


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the refusal is for machines without a GPU")
def test_without_a_gpu_it_says_so_and_exits_2():
    done = run("aten.sum.dim_IntList", ROOT / "prompts" / "examples" / "reduction.py")
    assert done.returncode == 2 and "needs a CUDA GPU" in done.stderr and "Traceback" not in done.stderr
