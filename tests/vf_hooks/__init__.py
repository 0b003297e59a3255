"""A verifiers (0.4) taskset whose scores depend on the parts of a rollout beyond the model's reply, for the
tests of `rlvr/Verifiers-v0`: a `setup` hook, a `finalize` hook, a reward that needs the runtime, and,
by config, a task toolset that reads what `setup` wrote, a shared (taskset-scoped) toolset and a slow tool.
Run as `vf_hooks` (tests/ on PYTHONPATH; verifiers starts each toolset as `python -m` its module).
"""

from vf_hooks.taskset import HooksTaskset

__all__ = ["HooksTaskset"]
