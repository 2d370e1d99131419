"""Agreement of the reconstruction with the confidential records to the single year of age and
within the age bin, for the exact release and swap-low (the 2010 published file's analogue):
20,000 synthetic persons (seed 2010), swap seed 2010, every table. Sets sdclab's figures beside
a reconstruction rate quoted with and without "some record variables (e.g. age) a bit off"
(docs/findings.md, row 53). Prints one JSON line.

    PYTHONPATH=src python benchmarks/age_agreement.py [persons]
"""

from __future__ import annotations

import json
import sys
import time

import sdclab
from sdclab.pipeline.evaluation import agreement

PERSONS = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000


def main() -> None:
    truth = sdclab.synthesize(PERSONS, seed=2010)
    releases = {}
    for name, settings in (("none", {}), ("swap-low", {"seed": 2010})):
        start = time.perf_counter()
        release = sdclab.protect(truth, name, **settings)
        found = agreement(sdclab.reconstruct(release, workers=1, draws=0).persons, truth)
        if isinstance(found, sdclab.NotMeasured):
            releases[name] = {"not_measured": found.reason}
            continue
        releases[name] = {
            "agree_exact_age": found.all.agree_exact_age,
            "agree_agebin": found.all.agree_agebin,
            "persons": found.all.persons,
            "seconds": round(time.perf_counter() - start, 1),
        }
    print(json.dumps({"benchmark": "age_agreement", "persons": PERSONS, "seed": 2010, **releases}))


if __name__ == "__main__":
    main()
