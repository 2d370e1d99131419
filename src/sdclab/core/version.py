"""sdclab's version: what releases, experiments and step digests record of the code that made
them (kept apart from the package's face, which imports the public API lazily)."""

__version__ = "0.1.0"
