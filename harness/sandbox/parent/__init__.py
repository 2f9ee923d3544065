"""The sandbox parent's side: what runs in the evaluating process (starting and watching a child,
the pool of fork servers, the environment it gets, sharing a GPU by phase). Nothing here imports
the child's side (``harness.sandbox.child``); both share ``harness.sandbox.job``, ``process_group``
and ``paths``."""
