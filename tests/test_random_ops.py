"""Random ops: the generator checks and the pooled distribution test of harness.checks.random_ops,
run in-process on plain functions (no Triton needed), and the seed-draw allowance of the guard."""
import torch

from bbagent.harness.checks.guards import AtenRecorder, LaunchCounter
from bbagent.harness.checks import random_ops
from bbagent.harness.checks.compare import compare
from bbagent.harness.checks.random_ops import random_failure

aten = torch.ops.aten
UNIFORM = aten.uniform_.default
SELF = torch.empty(40, 50)


def run_directly(thunk):
    return thunk()


def failure_of(fn, op=UNIFORM, args=(SELF, -1.0, 1.0), kwargs=None):
    return random_failure(op, args, kwargs or {}, fn, "cpu", SELF.numel(), run_directly)


def seeded_from_generator(self, low, high, *, generator=None):
    seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
    return self.uniform_(low, high, generator=torch.Generator().manual_seed(seed))


def test_a_kernel_that_draws_its_seed_from_the_generator_passes():
    assert failure_of(seeded_from_generator) is None


def test_a_fixed_seed_repeats_its_draw():
    def fixed(self, low, high, *, generator=None):
        return self.uniform_(low, high, generator=torch.Generator().manual_seed(7))
    failure = failure_of(fixed)
    assert failure["error_kind"] == "generator_misuse" and "does not advance" in failure["message"]


def test_ignoring_the_generator_is_not_reproducible():
    def own_generator(self, low, high, *, generator=None):
        return self.uniform_(low, high)  # the default generator, not the one passed
    failure = failure_of(own_generator)
    assert failure["error_kind"] == "generator_misuse" and "not reproducible" in failure["message"]


def test_a_seed_fixed_per_generator_ignores_reseeding():
    uses = []  # [generator, calls so far]; holding the generators keeps their identities apart

    def counts_calls_per_generator(self, low, high, *, generator=None):
        entry = next((e for e in uses if e[0] is generator), None) or uses.append([generator, 0]) or uses[-1]
        entry[1] += 1  # advances with each call, but never looks at the seed
        return self.uniform_(low, high, generator=torch.Generator().manual_seed(entry[1]))
    failure = failure_of(counts_calls_per_generator)
    assert failure["error_kind"] == "generator_misuse" and "ignores" in failure["message"]


def test_ops_without_a_generator_argument_use_the_default_generator():
    op = aten.randn_like.default
    assert random_failure(op, (SELF,), {}, lambda self: torch.randn_like(self), "cpu", SELF.numel(),
                          run_directly) is None
    failure = random_failure(op, (SELF,), {}, lambda self: torch.randn(self.shape, generator=torch.Generator()),
                             "cpu", SELF.numel(), run_directly)
    assert failure["error_kind"] == "generator_misuse" and "default generator" in failure["message"]


def test_pooled_draws_see_what_one_small_draw_cannot(monkeypatch):
    """125 values of uniform noise scaled to a normal's mean and std pass one draw's test;
    the pool the GPU path gathers (about 20,000 values) rejects them."""
    small = torch.empty(5, 25)

    def uniform_with_normal_moments(self, mean, std, *, generator=None):
        seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
        u = self.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(seed))
        return u.mul_(std * 12 ** 0.5).add_(mean)
    op, args = aten.normal_.default, (small, 0.0, 1.0)
    assert compare(op(*args), uniform_with_normal_moments(small.clone(), 0.0, 1.0), mode="distribution") is None
    monkeypatch.setattr(random_ops, "MAX_RANDOM_CALLS_CPU", random_ops.MAX_CALLS)  # the GPU's pool, on CPU
    failure = random_failure(op, args, {}, uniform_with_normal_moments, "cpu", small.numel(), run_directly)
    assert failure["error_kind"] == "distribution_mismatch" and "pooled over 160 calls" in failure["message"]


def test_a_draw_that_aten_does_not_vary_asks_nothing():
    """bernoulli with p = 1 draws ones whatever the seed; a kernel returning ones passes."""
    op = aten.bernoulli_.float
    ones = lambda self, p, *, generator=None: self.fill_(1.0)  # noqa: E731
    assert random_failure(op, (SELF, 1.0), {}, ones, "cpu", SELF.numel(), run_directly) is None


def test_the_guard_lets_a_random_kernel_draw_a_seed_and_nothing_more():
    def findings(target, thunk):
        recorder = AtenRecorder(target, LaunchCounter(), __file__)
        with recorder:
            thunk()
        return [f["op"] for f in recorder.findings]
    seed = lambda: torch.randint(2**31 - 1, (1,))  # noqa: E731
    assert findings(UNIFORM, seed) == []
    assert findings(UNIFORM, lambda: torch.randint(10, (1000,))) != []  # values, not a seed
    assert findings(aten.relu.default, seed) != []  # not a random op
    assert findings(aten.randint.low, lambda: torch.randint(0, 10, (1,))) != []  # the op itself
