"""Issue 81's autotuning budget, on the CPU: the table of tuned configs; a search within its share of
the budget, the calls it does not reach said; the table pinned where a Helion kernel is judged (in its
sandboxed child) and served (a call without a config runs the untuned one and warns, once); kept beside
the kernel, its digest judged with it, exported with it. Helion's own search needs a GPU: the GPU test
below and ``benchmarks/helion_check.py`` run it."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

from bbagent.agent.review.lifecycle import install, not_covered, set_status
from bbagent.agent.review.meta import Accepted
from bbagent.cli import main
from bbagent.harness import helion_configs
from bbagent.harness.helion_configs import CONFIGS_FILE, ConfigTable, TunedConfig
from conftest import KERNELS, PYTHONPATH, make_verdict

RELU = "aten.relu.default"
RELU_HELION = KERNELS / "relu_helion.py"


# Helion's kernels on the CPU run Triton's interpreter, which a process chooses before it imports triton:
# what runs a kernel in-process here runs in a fresh process, once for the module, and prints what it saw.
IN_FRESH_PROCESS = r"""
import json, shutil, sys, time, warnings
from pathlib import Path
import torch
from bbagent.harness import helion_configs
from bbagent.harness.helion_configs import CONFIGS_FILE, ConfigTable, TunedConfig, Tuning, key_text
from bbagent.harness.kernel_import import KernelImportError, import_module

relu, triton_relu, work = Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[1])
seen = {}
x = torch.randn(1000)
module = import_module(relu, "relu_key", "cpu")
module._relu.bind((x,))  # the key is complete once the call is bound
seen["key"] = key = key_text(module._relu, (x,))
table = ConfigTable(helion="test", gpu="cpu", budget_s=10.0, spent_s=1.0, configs=(
    TunedConfig(kernel="_relu", key=key, shapes="float32[1000]", config={"block_sizes": [256]}, search_s=1.0),))

folder = work / "kernel"
folder.mkdir()
shutil.copy(relu, folder / "kernel.py")
(folder / CONFIGS_FILE).write_text(table.to_json())
pinned = import_module(folder / "kernel.py", "relu_pinned", "cpu")
def warned(x, times):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        right = all(torch.equal(pinned.kernel(x), x.clamp_min(0)) for _ in range(times))
    return {"right": right, "warned": [str(w.message) for w in caught]}
seen["pinned_call"] = warned(x, 2)
seen["pinned_block_sizes"] = pinned._relu.kernel.bind((x,))._config.config["block_sizes"]
seen["other_call"] = warned(torch.randn(4, 5), 3)

refused = []
(folder / CONFIGS_FILE).write_text("{not json")
for kernel_file, name in ((relu, "relu_unreadable"), (triton_relu, "relu_triton_with_configs")):
    shutil.copy(kernel_file, folder / "kernel.py")
    try:
        import_module(folder / "kernel.py", name, "cpu")
        refused.append(None)
    except KernelImportError as exc:
        refused.append(str(exc))
    (folder / CONFIGS_FILE).write_text(table.to_json())
seen["refused"] = refused

helion_configs.MIN_SEARCH_S = 0.1
shares = []
def search(kernel, bound, args, seconds):
    shares.append(seconds)
    if len(shares) == 3:
        raise RuntimeError("no config compiled")
    time.sleep(seconds * (2 if len(shares) == 4 else 1))  # a search spends its share; the fourth, twice its share
    import helion
    return helion.Config(block_sizes=[128])
tuned = import_module(relu, "relu_tuned", "cpu")
tuning = Tuning(1.0, "cpu", search)
helion_configs.install(tuned, tuning)
before = torch.randn(7)  # the tests' calls, before the timing phase: no search, and the key is asked again after
assert torch.equal(tuned.kernel(before), before.clamp_min(0)) and not shares
tuning.active = True
calls = [torch.randn(10), torch.randn(20), torch.randn(2, 3), torch.randn(2, 3, 4), torch.randn(2, 3, 4, 5),
         torch.randn(1, 2, 3, 4, 5)]  # relu_helion's keys are its input's dtype and dimensions: five keys
right = True
for left, x in zip(range(len(calls), 0, -1), calls):
    tuning.shapes_left = left
    right = right and torch.equal(tuned.kernel(x), x.clamp_min(0))
seen["tuning"] = {"right": right, "shares": shares, "table": tuning.report()["tuned"],
                  "block_sizes": tuned._relu.kernel.bind((calls[0],))._config.config["block_sizes"]}
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    work = tmp_path_factory.mktemp("helion-configs")
    done = subprocess.run([sys.executable, "-c", IN_FRESH_PROCESS, str(work), str(RELU_HELION),
                           str(KERNELS / "relu_triton.py")], capture_output=True, text=True, cwd=work, timeout=600,
                          env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": PYTHONPATH})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _table(*rows: TunedConfig) -> ConfigTable:
    return ConfigTable(helion="test", gpu="cpu", budget_s=10.0, spent_s=1.0, configs=rows)


def _pinned_relu(config: dict, key: str) -> ConfigTable:
    return _table(TunedConfig(kernel="_relu", key=key, shapes="float32[1000]", config=config, search_s=1.0))


def test_the_table_reads_back_what_it_wrote_and_refuses_anything_else():
    table = ConfigTable(helion="1.4.0", gpu="NVIDIA H200", budget_s=60.0, spent_s=41.5, untuned=("k(x): spent",),
                        configs=(TunedConfig("k", "(1,)", "float32[8]", {"block_sizes": [64], "num_warps": 4}, 20.5),
                                 TunedConfig("k", "(2,)", "float32[9]", {"block_sizes": [32]}, 21.0)))
    text = table.to_json()
    assert ConfigTable.from_json(text) == table
    assert len(text.splitlines()) == 14, text  # a line per field and per config: a reviewer's diff reads it
    assert table.find("k", "(2,)").config == {"block_sizes": [32]} and table.find("k", "(3,)") is None
    empty = ConfigTable(helion="1.4.0", gpu="g", budget_s=1.0, spent_s=0.0, configs=())
    assert ConfigTable.from_json(empty.to_json()) == empty
    for wrong in ("", "[]", '{"schema": "other"}', json.dumps({"schema": helion_configs.SCHEMA, "configs": [{}]})):
        with pytest.raises(ValueError, match="not a bbagent.helion-configs document"):
            ConfigTable.from_json(wrong)


def test_a_served_helion_kernel_runs_its_pinned_config_and_warns_once_for_a_call_without_one(fresh):
    assert fresh["pinned_call"] == {"right": True, "warned": []}
    assert fresh["pinned_block_sizes"] == [256]  # the table's config, not the decorator's
    assert fresh["other_call"] == {"right": True, "warned": [
        f"Helion kernel _relu(float32[4, 5]): no tuned config in {CONFIGS_FILE}; it runs its untuned config"]}


def test_a_table_that_cannot_be_read_or_has_no_kernel_to_pin_is_refused_at_import(fresh):
    unreadable, no_kernel = fresh["refused"]
    assert unreadable and "cannot be read: not a bbagent.helion-configs document" in unreadable
    assert no_kernel and "has no @helion.kernel function at its top level" in no_kernel


def test_tuning_shares_what_is_left_of_the_budget_and_says_which_calls_it_did_not_reach(fresh):
    """Each search gets what is left over the shapes still to tune; once a share is below a search's
    least, the calls keep their untuned config, named in the table; a search that fails is named too."""
    tuning = fresh["tuning"]
    table = ConfigTable.from_json(tuning["table"])
    shares = tuning["shares"]
    assert tuning["right"] and tuning["block_sizes"] == [128]
    assert [row.shapes for row in table.configs] == ["float32[10]", "float32[2, 3]", "float32[2, 3, 4, 5]"]
    first, second, _ = table.configs
    assert shares[:2] == [pytest.approx(1.0 / 6), pytest.approx((1.0 - first.search_s) / 4)]
    assert shares[3] == pytest.approx((1.0 - first.search_s - second.search_s) / 2)
    assert table.spent_s == pytest.approx(sum(row.search_s for row in table.configs)) and table.budget_s == 1.0
    assert table.spent_s <= 1.0 + 0.05  # the fourth search overspent its share: the last call had none left
    assert table.untuned == ("_relu(float32[2, 3, 4]): the search failed (RuntimeError: no config compiled)",
                             "_relu(float32[1, 2, 3, 4, 5]): the budget was spent"), table.untuned


def test_the_judged_child_pins_the_table_and_reports_the_calls_without_a_config(fresh):
    """In the sandboxed child on the CPU, relu_helion judged with a table pinned: the 1-d calls ran the
    table's config, every other call its untuned one, listed in the Verdict; a config this Helion cannot
    compile is no failure of the kernel: its calls run the untuned config, listed too."""
    from bbagent.harness.interface import HERE, EvaluationRequest
    request = EvaluationRequest.of(RELU, device="cpu")
    verdict = HERE.evaluate(request.pinned(_pinned_relu({"block_sizes": [256]}, fresh["key"]).to_json()), RELU_HELION)
    assert verdict.passed, (verdict.error_kind, verdict.message[:500])
    pinned = verdict.helion_configs
    assert pinned is not None and pinned.tuned is None and pinned.pinned == 1, pinned
    assert pinned.unseen and all(call.startswith("_relu(") for call in pinned.unseen), pinned.unseen
    assert not [name for name in verdict.timings.imported_sealed if name.startswith("bbagent")]  # loaded before the seal
    broken = HERE.evaluate(request.pinned(_pinned_relu({"block_sizes": "big"}, fresh["key"]).to_json()), RELU_HELION)
    assert broken.passed and broken.helion_configs.pinned == 0, (broken.error_kind, broken.message[:300])
    assert "_relu(float32[1000])" in broken.helion_configs.unseen or len(broken.helion_configs.unseen) > \
        len(pinned.unseen), broken.helion_configs.unseen
    assert HERE.evaluate(request, RELU_HELION).helion_configs is None  # nothing asked, nothing stands in front


def _installed(root: Path, configs: str | None):
    return install(root, RELU_HELION.read_text(), Accepted.model_validate({
        "op": RELU, "written_for": RELU, "serves": [RELU], "run_id": "test", "dsl": "helion",
        "tests": {"passed": 1, "total": 1}, "versions": {"torch": torch.__version__, "triton": triton.__version__},
        "device": "cpu", "dtypes": ["float32"], "performance": {"measured": False}}), configs=configs)


def test_the_configs_are_kept_beside_the_kernel_and_judged_with_it(tmp_path, capsys, fresh):
    """Installed with its configs, the kernel's meta.json holds their digest; a table changed, removed or
    added since leaves the kernel unserved until it is judged again; a stored kernel is judged (eval,
    bench, review) with its table pinned, as served; and the package carries the table, checked by its
    digest where it is enabled."""
    from bbagent.agent.judging import as_served, stored_request
    from bbagent.agent.review.catalog import find
    root = tmp_path / "root"
    table = _pinned_relu({"block_sizes": [256]}, fresh["key"]).to_json()
    meta = _installed(root, table)
    folder = root / "generated_kernels" / RELU
    assert (folder / CONFIGS_FILE).read_text() == table and meta.helion_configs_sha256 and not_covered(folder, meta) is None
    current = find(root, RELU).current
    assert as_served(stored_request(current, root, device="cpu", timeout_s=60.0), current.kernel).helion_configs == table
    assert main(["eval", "--op", RELU, "--dsl", "helion", "--root", str(root), "--json"]) == 0  # the stored kernel
    assert json.loads(capsys.readouterr().out)["helion_configs"]["pinned"] == 1  # judged as served: pinned
    assert main(["review", "show", RELU, "--root", str(root)]) == 0  # piped: the file on stdout, the facts on stderr
    shown = capsys.readouterr()
    assert shown.out == RELU_HELION.read_text()
    assert "Helion configs (helion_configs.json, served pinned): 1 tuned with Helion test on cpu" in shown.err
    assert "_relu(float32[1000]): block_sizes=[256]" in shown.err
    (folder / CONFIGS_FILE).write_text(table.replace("256", "512"))
    assert "helion_configs.json, the Helion configs the kernel runs, changed since its tests" in not_covered(folder, meta)
    (folder / CONFIGS_FILE).unlink()
    assert "is missing since its tests" in not_covered(folder, meta)
    meta = _installed(tmp_path / "untuned", None)
    untuned = tmp_path / "untuned" / "generated_kernels" / RELU
    assert meta.helion_configs_sha256 is None and not (untuned / CONFIGS_FILE).exists()
    (untuned / CONFIGS_FILE).write_text(table)
    assert "was added since its tests" in not_covered(untuned, meta)

    packaged = tmp_path / "packaged"
    _installed(packaged, table)
    set_status(packaged / "generated_kernels" / RELU, "approved")
    assert main(["export", "--package", str(tmp_path / "project"), "--name", "tuned_kernels", "--root",
                 str(packaged), "--json"]) == 0
    capsys.readouterr()
    tree = tmp_path / "project" / "tuned_kernels"
    manifest = json.loads((tree / "manifest.json").read_text())["kernels"][0]
    copied = tree / "kernels" / manifest["folder"] / CONFIGS_FILE
    assert copied.read_text() == table and manifest["configs_sha256"]
    from bbagent.harness.packaged import Package  # the loader the package carries, as bbagent has it
    package = Package("tuned_kernels", tree)
    assert package._file_problem(package.manifest.kernels[0]) is None
    copied.write_text(table.replace("256", "512"))
    assert "is not the Helion configs approved with the kernel" in package._file_problem(package.manifest.kernels[0])


def test_an_edit_judged_while_its_configs_changed_is_refused(tmp_path, fresh):
    """An edited kernel.py judged (``review approve``/``verify``) is recorded with the table its
    judge pinned: a table changed while it was judged is refused, not installed under that Verdict;
    the table unchanged goes with the new version."""
    from bbagent.agent.review.catalog import find, judge_edit
    root = tmp_path / "root"
    table = _pinned_relu({"block_sizes": [256]}, fresh["key"]).to_json()
    _installed(root, table)
    folder = root / "generated_kernels" / RELU
    (folder / "kernel.py").write_text(RELU_HELION.read_text() + "# edited\n")
    digest = hashlib.sha256((folder / "kernel.py").read_bytes()).hexdigest()

    def judge(edit_table: bool):
        def judged(version):
            if edit_table:
                (folder / CONFIGS_FILE).write_text(table.replace("256", "512"))
            return make_verdict(verdict="pass", kernel={"path": str(version.kernel), "sha256": digest},
                                summary={"total": 1, "passed": 1})
        return judged
    edit = judge_edit(root, find(root, RELU).current, judge(True), "judged.json", "test")
    assert edit.meta is None and "helion_configs.json, the Helion configs it runs, changed while it was judged" in \
        edit.refused, edit.refused
    (folder / CONFIGS_FILE).write_text(table)
    edit = judge_edit(root, find(root, RELU).current, judge(False), "judged.json", "test")
    assert edit.refused is None and edit.meta is not None
    current = find(root, RELU).current
    assert (current.folder / CONFIGS_FILE).read_text() == table
    assert current.meta.helion_configs_sha256 == hashlib.sha256(table.encode()).hexdigest()


@pytest.mark.parametrize("argv, said", [
    (["--dsl", "helion", "--autotune-budget", "30", "--device", "cpu"], "tunes a Helion kernel on a GPU"),
    (["--autotune-budget", "30"], "--autotune-budget tunes Helion kernels: it needs --dsl helion"),
    (["--dsl", "helion", "--autotune-budget", "-1"], "--autotune-budget must be 0 or more seconds"),
])
def test_an_autotuning_budget_the_run_cannot_spend_is_refused_before_any_work(tmp_path, capsys, argv, said):
    code = main(["generate", "--op", RELU, "--provider", "replay", "--root", str(tmp_path), *argv])
    assert code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").glob("*/run.json"))


@pytest.mark.gpu
def test_a_helion_kernel_tuned_on_the_gpu_within_its_budget_is_judged_and_served_pinned(tmp_path, capsys):
    """generate --autotune-budget on the GPU: Helion's own search on the timed shapes within the budget, the
    configs kept beside the kernel and judged pinned; served, a tuned shape runs its config without a word."""
    try:  # here, not at collection: importing Helion in every test worker grows it
        import helion  # noqa: F401
    except ImportError as exc:
        pytest.xfail(f"the installed Helion does not import with this torch ({exc})")
    import warnings
    replay = tmp_path / "replay.json"
    replay.write_text(json.dumps({"model": "tuning", "exchanges": [
        {"response": f"```python\n{RELU_HELION.read_text()}```"}]}))
    budget = 20
    code = main(["generate", "--op", RELU, "--dsl", "helion", "--provider", "replay", "--replay", str(replay),
                 "--rounds", "1", "--no-dispatch", "--max-shapes", "3", "--autotune-budget", str(budget),
                 "--root", str(tmp_path)])
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    run = next((tmp_path / "runs").glob("*/run.json")).parent
    tuning = json.loads((run / "run.json").read_text())["tuning"]
    assert tuning["configs"] > 0 and tuning["spent_s"] <= budget * 1.2, tuning  # within its budget, give or take
    assert f"tuning: {tuning['outcome']}" in out.err
    folder = tmp_path / "generated_kernels" / RELU
    found = json.loads((run / "tuning" / "tuning-verdict.json").read_text())["helion_configs"]["tuned"]
    table = ConfigTable.from_json(found)  # what the search found, kept or not
    assert table.budget_s == budget and table.configs and table.spent_s == tuning["spent_s"]
    if tuning["outcome"] == "tuned":
        assert (folder / CONFIGS_FILE).read_text() == found and (run / "tuning" / "pinned-verdict.json").is_file()
        assert json.loads((folder / "meta.json").read_text())["helion_configs_sha256"]
    else:  # a relu is memory-bound: the default config may be as fast, and then the kernel stays as it was
        assert tuning["outcome"] == "slower" and "it keeps its untuned configs" in tuning["message"], tuning
        assert not (folder / CONFIGS_FILE).exists()
        (folder / CONFIGS_FILE).write_text(found)  # served with them all the same: the pinning is what is checked
    dtype, dims = table.configs[0].shapes.split("[")
    x = torch.randn(*[int(n) for n in dims.rstrip("]").split(", ")], device="cuda").to(getattr(torch, dtype))
    from bbagent.harness.kernel_import import import_module
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        served = import_module(folder / "kernel.py", "relu_tuned_gpu", "cuda")
        assert torch.equal(served.kernel(x), x.clamp_min(0))
        assert served._relu.kernel.bind((x,))._config.config["block_sizes"] == table.configs[0].config["block_sizes"]
    assert not [w for w in caught if "tuned config" in str(w.message)], [str(w.message) for w in caught]
