"""Evaluation: pass@k (passk.py) of a policy (policy.py), a served model (endpoint.py) or a model sampled by
the trainer's generators, over the trainer's episode loop; `rlvr eval` is cli.py. Import the module you need."""
