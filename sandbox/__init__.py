"""Untrusted code run against unit tests, isolated in Docker."""
