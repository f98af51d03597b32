"""Clients of Verdict's REST API that ship with the repository (standard library only)."""
