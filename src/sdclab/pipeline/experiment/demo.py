"""The built-in experiments of ``sdclab demo``: the US 2010 census's and the EU 2021 census's."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from sdclab.censuses import census_named
from sdclab.core.census.model import Census
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

TRS = {
    "rate": "0.05",
    "risk_variables": "SEX,AGE.L,POB.L",
    "risk_levels": "nuts3,lau",
    "k_anonymity": "3",
    "similar": "size",
}
"""Targeted record swapping as the ESS recommends: every household with a member whose sex ×
broad age group × place of birth is seen fewer than 3 times in their NUTS 3 region or LAU swaps
(about a quarter of the households of the demo's small LAUs), at least 5% of households in all,
each with a donor household of the same size."""
TRS_CHAINED = ";".join(f"{k}={v}" for k, v in TRS.items())


def administrative(census: Census) -> str:
    """The census's tables on its main (administrative) geography: suppression's rules read the
    persons of each unit from its total table there, so the grid's are not suppressed."""
    return ",".join(census.tables_on(census.geography))


@cache
def eu_demo() -> Experiment:
    """The built-in experiment of ``sdclab demo --census eu2021``: targeted record swapping as
    the ESS recommends, the cell key method with the ESS p-table alone and after that swapping
    (the ESS 2021 recipe), geometric noise and TopDown at two budgets each, and cell
    suppression, on 30,000 synthetic persons of the EU 2021 census, each release reconstructed
    from its LAU hypercubes and, apart, from its 1 km grid, and reidentified; accuracy compared
    per LAU (docs/europe.md)."""
    eu = census_named("eu2021")
    return Experiment.model_validate(
        {
            "population": {"census": "eu2021", "persons": 30_000, "seed": 2021},
            "mechanisms": [
                {"name": "none"},
                {"name": "swap", "label": "trs", "settings": TRS, "seed": 1},
                {
                    "name": "cellkey",
                    "label": "cellkey-ess",
                    "settings": {"ptable": "ess-d2"},
                    "seed": 2,
                },
                {
                    "name": "cellkey",
                    "label": "trs-cellkey",
                    "settings": {"ptable": "ess-d2", "swap": "swap", "swap_settings": TRS_CHAINED},
                    "seed": 3,
                },
                {"name": "geometric", "settings": {"epsilon": [1, 4]}, "seed": 4},
                {
                    "name": "topdown",
                    "label": "topdown-lau",
                    "settings": {
                        "rho": [1, 4],
                        "tables": "population,3.1,3.2,3.3",
                        "measurements": "false",
                    },
                    "seed": 5,
                },
                {"name": "suppress", "settings": {"tables": administrative(eu)}},
            ],
            "attacks": {"workers": 2, "targets": ["grid"]},  # the 1 km grid attacked too
            "report": {"level": "lau"},  # where the disclosure lies (swaps stay within NUTS 3)
        },
        context={"census": eu},
    )


DEMOS: dict[str, Callable[[], Experiment]] = {"us2010": lambda: DEMO, "eu2021": eu_demo}
"""The built-in experiment of each census ``sdclab demo --census`` knows (built when asked)."""
