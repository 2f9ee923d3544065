"""A program's size constants found in its text and changed there (harness.program_sizes), and the
harness's poisoning of freed memory where a program's large inputs leave little of it."""
from bbagent.harness.program_sizes import shrinkings, shrunk_text, size_constants

TEXT = """import torch
batch_size = 16
height = width = 12  # chained
kernel_size = 3
N = 2048 * 2
input_shape = (8192 * 2, 4, 64); groups = 8
flag = True
name = "x"
offset = -(4)
"""


def test_the_size_constants_are_top_level_integers_of_at_least_eight():
    found = {c.label: c.value for c in size_constants(TEXT)}
    assert found == {"batch_size": 16, "height = width": 12, "N": 4096, "input_shape[0]": 16384,
                     "input_shape[2]": 64, "groups": 8}
    assert [c.names for c in size_constants(TEXT)][:3] == [("batch_size",), ("height", "width"), ("N",)]
    assert size_constants("def f(:\n") == [] and size_constants("x = 2 ** 40\n") == []  # no parse; no power


def test_shrinkings_are_tried_odd_then_halved_then_the_first_alone():
    constants = size_constants(TEXT)
    odd, halved, first = shrinkings(constants)
    assert {c.label: v for c, v in odd.values.items()} == {
        "batch_size": 5, "height = width": 5, "N": 1365, "input_shape[0]": 5461, "input_shape[2]": 21, "groups": 5}
    assert all(v % 2 == 1 and v < c.value for c, v in odd.values.items())
    assert {c.label: v for c, v in halved.values.items()} == {
        "batch_size": 8, "height = width": 6, "N": 2048, "input_shape[0]": 8192, "input_shape[2]": 32, "groups": 4}
    assert [c.label for c in first.values] == ["batch_size"]
    assert shrinkings([]) == [] and len(shrinkings(size_constants("n = 64\n"))) == 2


def test_the_new_values_are_written_in_place_of_the_old():
    odd = shrinkings(size_constants(TEXT))[0]
    namespace = {}
    exec(shrunk_text(TEXT, odd).replace("import torch\n", ""), namespace)  # noqa: S102 - the test's own text
    assert (namespace["batch_size"], namespace["height"], namespace["width"], namespace["kernel_size"]) == (5, 5, 5, 3)
    assert namespace["N"] == 1365 and namespace["input_shape"] == (5461, 4, 21) and namespace["groups"] == 5
    assert "# chained" in shrunk_text(TEXT, odd)
    assert odd.renamed() == {"batch_size": (16, 5), "height": (12, 5), "width": (12, 5), "N": (4096, 1365),
                             "groups": (8, 5)}
    assert odd.described().startswith("batch_size 16→5, height = width 12→5, N 4096→1365, input_shape[0] 16384→5461")


def test_poisoning_freed_memory_stops_where_the_device_runs_out(monkeypatch):
    """A KernelBench level-1 problem holds 6 GiB per input: three poisoned copies of it did not fit
    an 80 GB H100 beside its draw, and the harness failed (worker_error) where the answer was right.
    Running out of memory while poisoning means no cached block of that size is left unpoisoned."""
    import torch
    from bbagent.harness import inputs
    made = []

    def poisoned_like(t):
        if len(made) == 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
        made.append(t)
        return torch.full(t.shape, float("nan"))
    monkeypatch.setattr(inputs, "poisoned_like", poisoned_like)
    inputs.poison_freed_memory([torch.zeros(4), torch.zeros(8)], copies=3)  # no error: poisoned what fit
    assert len(made) == 2
