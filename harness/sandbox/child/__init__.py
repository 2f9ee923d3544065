"""The sandbox child's side: what runs in the sandboxed process (the worker, its fork server, its
containment, compiling ahead, the timing phase). Nothing here imports the parent's side
(``harness.sandbox.parent``); both share ``harness.sandbox.job``, ``process_group`` and ``paths``."""
