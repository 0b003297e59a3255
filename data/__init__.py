"""Packaged task data (original task sets of rlvr's own)."""
