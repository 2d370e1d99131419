"""The built-in experiment of ``sdclab demo``."""

from __future__ import annotations

from sdclab.pipeline.experiment.spec import Experiment

DEMO = Experiment.model_validate(
    {
        "population": {
            "persons": 4_000,
            "seed": 2010,
            "tracts": 4,
            "counties": 2,
            "replicates": 2,
        },
        "mechanisms": [
            {"name": "none"},
            {"name": "swap-low", "seed": 1},
            {"name": "swap-high", "seed": 2},
            {"name": "psa", "settings": {"rate": ["0.02", "0.05"]}, "seed": 3, "replicates": 2},
            {
                "name": "topdown",
                "label": "topdown-dhc",
                "settings": {"rho": [1, 4, 15.3]},
                "seed": 4,
                "replicates": 2,
            },
            {
                "name": "topdown",
                "label": "topdown-pl94",
                "settings": {"product": "pl94"},
                "seed": 5,
            },
            {
                "name": "cellkey",
                "label": "cellkey-ons",
                "settings": {"ptable": "ons-10-5", "keys": "drawn"},
                "seed": 6,
                "replicates": 2,
            },
            {
                "name": "cellkey",
                "label": "cellkey-maxent",
                "settings": {"ptable": "maxent", "bound": 5, "variance": 3, "keys": "drawn"},
                "seed": 6,
                "replicates": 2,
            },
            {"name": "geometric", "settings": {"epsilon": [2, 8]}, "seed": 7, "replicates": 2},
            {"name": "safetab_h", "seed": 8},
            {"name": "suppress", "settings": {"complementary": "true"}},
        ],
        "attacks": {"attackers": ["census", "commercial"]},
    }
)
"""The built-in experiment of ``sdclab demo``: a sweep (TopDown at 3 budgets, the cell key
method with 2 p-tables, geometric noise at 2 budgets, the PSA at 2 rates, 2 replicates each, and
the one-point mechanisms) on 4,000 persons in 4 tracts of 2 counties and on a second synthetic
population (another seed), so that every setting's interval covers the population as well as the
noise; sized to finish, attacks included, within 15 minutes on 2 cores (docs/experiments.md).
The 50,000-person study behind docs/findings.md is ``examples/study-50k.toml``."""
