"""The verdict on a corpus of known kernels (tests/kernels/corpus.json): correct Triton kernels over
relu, add (functional, in-place, out=), sum, softmax, mm, gather and index_select pass; wrong,
cheating and faulty ones fail with the failure kinds the manifest allows.

Runs on the default device: the Triton interpreter here, the GPU on a GPU machine
(`python -m pytest tests/test_corpus.py` there, or `python -m bbagent.harness.selfcheck` for a table).
The seed is fixed for reproducibility; set BBAGENT_CORPUS_SEED to draw other inputs.
"""
import os

import pytest

from conftest import KERNELS
from bbagent.harness.evaluate import default_device
from bbagent.harness.selfcheck import entry_id, expected_kinds, load_corpus, run_entry

ENTRIES = load_corpus(KERNELS / "corpus.json")
SEED = int(os.environ.get("BBAGENT_CORPUS_SEED", "1234"))


def test_corpus_is_broad_enough():
    def expectations(entry):
        return list(entry["expect"].values()) if isinstance(entry["expect"], dict) else [entry["expect"]]
    wrong = [e for e in ENTRIES if any(x != "pass" for x in expectations(e))]
    correct = [e for e in ENTRIES if "pass" in expectations(e)]
    assert len(wrong) >= 30 and len(correct) >= 12
    assert len({e["op"] for e in wrong}) >= 8
    assert {e["op"] for e in correct} >= {e["op"] for e in wrong}
    assert all((KERNELS / e["kernel"]).is_file() for e in ENTRIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry_id(e) for e in ENTRIES])
def test_corpus_entry(entry):
    device = default_device()
    if expected_kinds(entry, device) is None:
        pytest.skip(f"{entry['pitfall']}: no expectation on {device}")
    row = run_entry(entry, KERNELS, SEED, device)
    assert row["ok"], (f"{row['id']}: expected {row['expect']}, saw {row['seen']} (seed {SEED}); "
                       f"{row['message']}")
