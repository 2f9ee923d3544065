"""The child's device memory on a GPU shared with other evaluations (``harness.sandbox.parent.gpu_share``):
what its allocator keeps cached between large tests, and the harness's own work retried when the
device ran out of memory for it (another evaluation held the memory at that moment).

A test's inputs, its reference and its checks are the harness's work; when one of them raises
``torch.OutOfMemoryError`` the test is run again, whole, after the allocator's cache is emptied
and a growing pause (``OOM_WAITS_S``): the candidate is called again too, which a correct kernel
allows. Only after the last pause does the error leave the test, as the harness's failure
(never the kernel's), and the parent runs the evaluation again alone. The kernel's own
out-of-memory is its result, judged by the parent the same way (``harness.evaluate``).
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass

from bbagent.harness.gpu_pause import checkpoint

OOM_WAITS_S = (0.5, 1.0, 2.0, 4.0, 8.0)  # before each retry of a test whose harness side ran out of memory


@dataclass
class MemoryRetries:
    """What this child spent on retries (reported in ``harness.events.Done``)."""
    count: int = 0
    wait_s: float = 0.0


RETRIES = MemoryRetries()


def retrying_out_of_memory(run, torch):
    """``run()``, again after each pause of ``OOM_WAITS_S`` while it raises ``torch.OutOfMemoryError``;
    the error of the last try is raised."""
    for wait in (*OOM_WAITS_S, None):
        try:
            return run()
        except torch.OutOfMemoryError:
            if wait is None:
                raise
        # out of the except block: the failed try's frames, and the tensors they held, are gone
        started = time.perf_counter()
        gc.collect()
        torch.cuda.empty_cache()
        time.sleep(wait)
        checkpoint()  # not into another evaluation's timing
        RETRIES.count += 1
        RETRIES.wait_s += time.perf_counter() - started


CACHED_MEMORY_KEPT = 2 << 30  # at least; a sixteenth of the device's memory where that is more
CACHED_MEMORY_SHARE = 16
DEVICE_SHORT_SHARE = 4  # the device runs short when less than a quarter of its memory is free
FREE_CHECK_INTERVAL_S = 0.5  # asking the device for its free memory costs (4-12 ms a time on an H200)
_free_checked_at = [float("-inf")]


def memory_kept(torch) -> int:
    return max(CACHED_MEMORY_KEPT, torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
               // CACHED_MEMORY_SHARE)


def give_back_cached_memory(torch) -> None:
    """Evaluations share a GPU: when the device runs short of free memory, what this process's
    allocator keeps cached after a large test is returned to it, so that another evaluation's
    test (or its reference) finds it. Seen without this: 8 evaluations of mm at once, 5 ended in
    the harness's own CUDA OOM. Up to a sixteenth of the device stays cached, and nothing is
    returned while a quarter of the device is free, asked at most every half second: emptying
    costs (after every large test, 1.7 s of add's suite on an H200; past a sixteenth, 140 ms a
    time after mm's large tests, 4 s of its suite), asking for the free memory after each of
    mm's large tests cost 3 s more, and an evaluation alone on its GPU has no one to give to."""
    if torch.cuda.memory_reserved() <= memory_kept(torch):
        return
    now = time.monotonic()
    if now - _free_checked_at[0] < FREE_CHECK_INTERVAL_S:
        return
    _free_checked_at[0] = now
    free, total = torch.cuda.mem_get_info()
    if free < total // DEVICE_SHORT_SHARE:
        torch.cuda.empty_cache()


