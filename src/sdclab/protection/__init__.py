"""The mechanisms, one module each (the protocol: :mod:`.base`), and their registry
(:mod:`.registry`), whose names this package hands on."""

from sdclab.protection.base import Mechanism, check_seed, parse_settings
from sdclab.protection.registry import MECHANISMS, get, run

__all__ = ["MECHANISMS", "Mechanism", "check_seed", "get", "parse_settings", "run"]
