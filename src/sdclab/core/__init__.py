"""The generic core: a census as a value (attributes, geographies, tables), histogram
domains and queries, tabulation, published tables and their relations, releases, privacy
accounting and exact noise samplers, solvers. Nothing here knows a particular census,
mechanism or attack."""
