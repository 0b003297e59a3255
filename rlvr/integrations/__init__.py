"""Adapters for other RL stacks and the HTTP reward server.

`trl` (reward functions for TRL's trainers), `verl` (`compute_score` for verl's reward
managers), `openrlhf` (the reward-function file and remote reward-model format),
`server`/`serve` (`rlvr serve`) and `client` (`RemoteVerifier`, scoring on such a server). All score through `scoring.score_items`, which keeps one
verifier instance, and so one set of worker pools, per process. Importing this package
imports none of them; it makes `import verifiers` mean the PyPI package wherever Python runs
(`pypi_verifiers`: the repository's own `verifiers/` folder shadows it from the repository root).
"""

from rlvr.integrations import pypi_verifiers

pypi_verifiers.install()
