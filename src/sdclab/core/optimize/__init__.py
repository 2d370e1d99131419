"""Solvers shared by the mechanisms and the attacks."""
