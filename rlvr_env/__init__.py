"""The verifiers taskset id `rlvr-env`: any rlvr env in `vf-eval` (see rlvr.integrations.verifiers_env).

verifiers imports a taskset by its top-level module name, hence this one-line package.
"""

from rlvr.integrations.verifiers_env import RlvrTaskset

__all__ = ["RlvrTaskset"]
