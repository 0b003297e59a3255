"""A verifiers (0.4) taskset with a tool, laid out as `vf-init vault -T` scaffolds one, for the tests of
`rlvr/Verifiers-v0` on tool tasksets.

Each task hides a six-digit code in one numbered locker; only the toolset's `open_locker` tool reads it,
so the code cannot be known without a call. verifiers imports the taskset by name (`taskset="vf_vault"`)
and starts the toolset per rollout as `python -m vf_vault.servers.tool` (tests/ must be on PYTHONPATH).
"""

from vf_vault.taskset import VaultTaskset

__all__ = ["VaultTaskset"]
