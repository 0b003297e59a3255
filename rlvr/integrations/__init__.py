"""Adapters for other RL stacks (TRL, verl, OpenRLHF) and the HTTP reward server."""
