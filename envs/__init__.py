"""Gymnasium environments for math and code tasks."""
