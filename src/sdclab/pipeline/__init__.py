"""The pipeline: the public API (one function per step), evaluation, typed results,
experiments that chain the steps and the report."""
