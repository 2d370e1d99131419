"""The runner: every release of an experiment on every population replicate, with its attacks and
evaluation, each step taken from the cache or made, and the progress said as it goes."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from sdclab import protection
from sdclab.attacks import linkage
from sdclab.attacks.reconstruction_files import METRICS_FILE
from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.io import read_population
from sdclab.core.digest import frames_digest
from sdclab.core.figures import NotMeasured
from sdclab.core.fileio import Modes, read_json_object
from sdclab.core.randomness import drew_from_stream
from sdclab.pipeline import api
from sdclab.pipeline.census_view import NO_VARIABILITY, census_view, declared_summary
from sdclab.pipeline.evaluation import block_size_counts
from sdclab.pipeline.experiment.cache import (
    Step,
    StepCache,
    _digest,
    _directory_digest,
    _file_digest,
    _settings_files_digest,
)
from sdclab.pipeline.experiment.replicates import population_seed
from sdclab.pipeline.experiment.spec import Experiment, Point, on_population
from sdclab.pipeline.experiment.steps import (
    CENSUS_PERSONS,
    _make_census_persons,
    _make_population,
    _make_reconstruction,
    _make_reidentification,
    _make_release,
    _make_risk,
    _make_vulnerable_group,
    read_vulnerable_group,
)
from sdclab.pipeline.results.evaluation import no_risk_analysis
from sdclab.pipeline.results.experiment import (
    ExperimentResult,
    PopulationSummary,
    ReleaseResult,
    Sweep,
)
from sdclab.pipeline.results.reconstruction import ReconstructionResult
from sdclab.pipeline.results.reidentification import Reidentification, VulnerableGroup
from sdclab.release import Release


def progress(done: int, total: int, elapsed: float, title: str) -> str:
    """``[k/N] title``, with the time so far and, once a release is done, an estimate of the
    time left (the mean time of the releases done so far times those left)."""
    line = f"[{done + 1}/{total}] {title} — {_duration(elapsed)} elapsed"
    if done:
        line += f", about {_duration(elapsed / done * (total - done))} left"
    return line


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


NOTHING_TO_RECONSTRUCT = "the release publishes no person tables to reconstruct from"


class Runner:
    """Runs the steps of an experiment, reusing finished steps found on disk."""

    def __init__(
        self,
        experiment: Experiment,
        out: Path,
        say: Callable[[str], None],
        modes: Modes | None = None,
    ) -> None:
        self.experiment = experiment
        self.steps = StepCache(Path(out), say, modes)
        self.published: dict[tuple[str, str], str] = {}
        """The first replicate of every (setting, release tables) seen (digests in memory)."""
        self.vulnerable: tuple[VulnerableGroup, str] | None = None
        """The population's fixed vulnerable group and its step's digest, once made."""
        self.drew: dict[str, bool] = {}
        """Whether each release made so far drew from its random stream (by title)."""
        self.census = experiment.census
        self.declared = experiment.population.declared
        self.census_file = experiment.population.census
        if self.declared:  # solution variability is the US census's (its default turns it on)
            attacks = experiment.attacks.model_copy(update={"variability": False})
            self.experiment = experiment.model_copy(update={"attacks": attacks})

    def run(self) -> ExperimentResult:
        spec = self.experiment.population
        points = self.experiment.points()
        total = len(points) * spec.replicates
        releases: dict[str, ReleaseResult] = {}
        summaries = []
        began = time.perf_counter()
        for replicate in range(1, spec.replicates + 1):
            truth, pop_digest = self.population(replicate)
            self.vulnerable = self.vulnerable_group(truth, pop_digest)
            summaries.append(self.summary(truth, replicate))
            deterministic: dict[str, ReleaseResult] = {}
            """The first replicate of each setting whose mechanism drew nothing from its stream
            (on this population)."""
            for point in (on_population(p, replicate) for p in points):
                elapsed = time.perf_counter() - began
                self.steps.say(progress(len(releases), total, elapsed, point.title))
                first = deterministic.get(point.setting)
                if first is not None:  # the seed changes nothing: a replicate is the same release
                    releases[point.title] = replicate_of(first, point)
                    continue
                releases[point.title] = self.mechanism(point, truth, pop_digest)
                if not self.drew[point.title]:
                    deterministic[point.setting] = releases[point.title]
        return ExperimentResult(
            summaries[0],
            releases,
            tuple(self.steps.computed),
            tuple(self.steps.reused),
            population_replicates=tuple(summaries[1:]),
            census=census_view(self.census) if self.declared else None,
        )

    def population(self, replicate: int) -> tuple[Population, str]:
        """Population replicate ``replicate`` and its step's digest (the first's digest is what
        it was before there were replicates, so earlier steps stay valid). A declared census's
        persons are read from their file, not copied into a step."""
        spec = self.experiment.population
        if spec.synthetic_census:
            digest = _digest("population", spec.source(), self.census.digest)
            made = self.steps.get(Step("population", digest), partial(_make_census_persons, spec))
            read = api.read_population(made / CENSUS_PERSONS, census=spec.census)
            return read, digest
        if self.declared:
            digest = _digest("population", spec.digested(), self.census.digest, _file_digest(spec))
            mapping = spec.mapping
            read = api.read_population(str(spec.path), census=self.census_file, mapping=mapping)
            return read, digest
        parts = (spec.digested(), _directory_digest(spec.path))
        further = (replicate,) if replicate > 1 else ()
        digest = _digest("population", *parts, *further)
        step = Step("population" + (f":p{replicate}" if further else ""), digest)
        made = self.steps.get(step, partial(_make_population, spec, replicate))
        return read_population(made), digest

    def summary(self, truth: Population, replicate: int) -> PopulationSummary:
        """What the results say of population replicate ``replicate``."""
        spec = self.experiment.population
        if self.declared:
            return declared_summary(truth, spec.source())  # type: ignore[arg-type]
        source = spec.source()
        if replicate > 1:
            how = "bootstrap" if spec.path is not None else "seed"
            source = {**source, "replicate": replicate, how: population_seed(spec.seed, replicate)}
        return PopulationSummary(
            source=source,
            persons=truth.n_persons,
            units=truth.n_units,
            geography=truth.geography.summary,
            uniques=linkage.population_uniques(truth),
            block_sizes=block_size_counts(truth),
            vulnerable=(
                self.vulnerable[0].to_dict()
                if self.vulnerable is not None
                else NotMeasured("the experiment does not reconstruct (attacks.reconstruct)")
            ),
        )

    def vulnerable_group(
        self, truth: Population, pop_digest: str
    ) -> tuple[VulnerableGroup, str] | None:
        """The population's fixed vulnerable group and its step's digest, from the exact
        release reconstructed with variability (None when the experiment does not reconstruct)."""
        attacks = self.experiment.attacks
        if not attacks.reconstruct or self.declared:
            return None
        digest = _digest(
            "vulnerable", pop_digest, attacks.seed, attacks.time_limit, attacks.node_limit
        )
        step = Step("vulnerable", digest)
        made = self.steps.get(step, partial(_make_vulnerable_group, truth, attacks))
        return read_vulnerable_group(made), digest

    def mechanism(self, m: Point, truth: Population, pop_digest: str) -> ReleaseResult:
        """One release, its attacks and its evaluation."""
        mechanism = protection.get(m.name)
        files = _settings_files_digest(m.settings)
        settings = {k: str(v) for k, v in m.settings.items()}
        rel_digest = _digest("release", pop_digest, m.name, settings, files, m.seed)
        step = Step(f"release:{m.title}", rel_digest)
        release = api.read_release(
            self.steps.get(step, partial(_make_release, truth, m)) / "release"
        )
        self.drew[m.title] = drew_from_stream(release.randomness)
        risk: dict[str, Any] | NotMeasured = no_risk_analysis(m.name)
        if mechanism.risk_analysis is not None:
            step = Step(f"risk:{m.title}", _digest("risk", rel_digest))
            made = self.steps.get(step, partial(_make_risk, release, truth))
            risk = read_json_object(made / METRICS_FILE)
        reconstruction, reidentification = self.attacks(m, release, truth, rel_digest)
        naive = self.naive(m, release, rel_digest) if reconstruction is not None else None
        block_only = self.block_only(m, release, truth, rel_digest)
        targets = {  # (the experiment refuses targets without reconstruction)
            t: self.target(t, m, release, truth, rel_digest)
            for t in self.experiment.attacks.targets
        }
        return ReleaseResult(
            title=m.title,
            settings=mechanism.parse(m.settings, self.census).recorded(),
            notes=release.notes,
            evaluation=api.evaluation(
                release, truth, reconstruction, reidentification, risk, naive, block_only, targets
            ),
            point=Sweep(
                m.entry, m.setting, m.varied, m.replicate, self.same_as(m, release), m.population
            ),
            protection=(
                release.protection.to_dict()
                if release.protection is not None
                else NotMeasured("the release does not record whether it protects")
            ),
        )

    def same_as(self, m: Point, release: Release) -> str | None:
        """The earlier replicate of ``m``'s setting whose release is identical (the mechanism
        drew no fresh randomness for it), if any."""
        key = (m.setting, frames_digest(*(t.frame(labels=False) for t in release.tables.values())))
        first = self.published.setdefault(key, m.title)
        return None if first == m.title else first

    def naive(self, m: Point, release: Release, rel_digest: str) -> ReconstructionResult | None:
        """The naive reconstruction of a noisy release (None for exact ones: it is the same)."""
        attacks = self.experiment.attacks
        if not attacks.naive or protection.get(release.mechanism).exact_tables:
            return None
        digest = _digest("naive", rel_digest, attacks.seed, attacks.time_limit, attacks.node_limit)
        step = Step(f"naive-reconstruction:{m.title}", digest)
        made = self.steps.get(step, partial(_make_reconstruction, release, attacks, "naive"))
        return api.read_reconstruction(made / "recon")

    def attacks(
        self, m: Point, release: Release, truth: Population, rel_digest: str
    ) -> tuple[ReconstructionResult | None, dict[str, Reidentification | NotMeasured]]:
        """The reconstruction of a release and the reidentification by each attacker."""
        attacks = self.experiment.attacks
        if not attacks.reconstruct:
            skipped = NotMeasured("the experiment does not reconstruct (attacks.reconstruct)")
            return None, dict.fromkeys(attacks.attackers, skipped)
        if not release.tables:
            return None, {a: NotMeasured(NOTHING_TO_RECONSTRUCT) for a in attacks.attackers}
        rec_digest = _digest(
            "reconstruction",
            rel_digest,
            attacks.seed,
            attacks.variability,
            attacks.time_limit,
            attacks.node_limit,
            "published",
        )
        step = Step(f"reconstruction:{m.title}", rec_digest)
        made = self.steps.get(step, partial(_make_reconstruction, release, attacks, "published"))
        recon = api.read_reconstruction(made / "recon")
        unlinkable = None if self.declared else linkage.not_linkable(recon.persons)
        if self.declared:  # the default asked for it: n/a, with the reason
            n_a = NotMeasured(NO_VARIABILITY).to_dict()
            recon = replace(recon, metrics={**recon.metrics, "variability": n_a})
        links: dict[str, Reidentification | NotMeasured] = {}
        for preset in attacks.attackers:
            if unlinkable is not None:
                links[preset] = NotMeasured(unlinkable)
                continue
            group, group_digest = self.vulnerable if self.vulnerable else (None, None)
            step = Step(
                f"reidentify:{m.title}:{preset}",
                _digest("reid", rec_digest, preset, attacks.seed, group_digest),
            )
            make = partial(
                _make_reidentification, recon, release, truth, preset, attacks.seed, group
            )
            made = self.steps.get(step, make)
            links[preset] = Reidentification.from_dict(read_json_object(made / METRICS_FILE))
        return recon, links

    def block_only(
        self, m: Point, release: Release, truth: Population, rel_digest: str
    ) -> dict[str, Reidentification | NotMeasured] | NotMeasured:
        """The reidentification of the release's reconstruction from its block tables alone, by
        each attacker (the attack paper's rHDF_b), when the experiment asks for it."""
        attacks = self.experiment.attacks
        if not (attacks.block_only and attacks.reconstruct):
            return NotMeasured(NO_BLOCK_ONLY)
        if not release.tables:
            return {a: NotMeasured(NOTHING_TO_RECONSTRUCT) for a in attacks.attackers}
        digest = _digest(
            "block-reconstruction", rel_digest, attacks.seed, attacks.time_limit, attacks.node_limit
        )
        step = Step(f"block-reconstruction:{m.title}", digest)
        make = partial(_make_reconstruction, release, attacks, "published", block_only=True)
        recon = api.read_reconstruction(self.steps.get(step, make) / "recon")
        group, group_digest = self.vulnerable if self.vulnerable else (None, None)
        title, unlinkable = f"reidentify-block:{m.title}", linkage.not_linkable(recon.persons)
        return self.reidentified(
            recon,
            release,
            truth,
            (title, "reid-block", digest),
            group_digest,
            group=group,
            unlinkable=unlinkable,
        )

    def reidentified(
        self,
        recon: ReconstructionResult,
        release: Release,
        truth: Population,
        step: tuple[str, str, str],
        *digested: Any,
        group: VulnerableGroup | None = None,
        unlinkable: str | None = None,
    ) -> dict[str, Reidentification | NotMeasured]:
        """Each attacker's reidentification of ``recon``, a step each (``step``: the steps' title,
        the kind and the digest they are derived from; ``digested``: what else they depend on);
        every one n/a when the records cannot be linked."""
        attacks = self.experiment.attacks
        title, kind, digest = step
        links: dict[str, Reidentification | NotMeasured] = {}
        for preset in attacks.attackers:
            if unlinkable is not None:
                links[preset] = NotMeasured(unlinkable)
                continue
            made = self.steps.get(
                Step(f"{title}:{preset}", _digest(kind, digest, preset, attacks.seed, *digested)),
                partial(_make_reidentification, recon, release, truth, preset, attacks.seed, group),
            )
            links[preset] = Reidentification.from_dict(read_json_object(made / METRICS_FILE))
        return links

    def target(
        self, target: str, m: Point, release: Release, truth: Population, rel_digest: str
    ) -> dict[str, Reidentification | NotMeasured]:
        """The reidentification, by each attacker, of the release's reconstruction on a further
        attack ``target`` of its census (the European census's 1 km grid)."""
        attacks = self.experiment.attacks
        aimed = release.aimed_at(target)
        if not aimed.tables:
            why = f"the release publishes no table on the {aimed.census.geography.name} geography"
            return {a: NotMeasured(why) for a in attacks.attackers}
        digest = _digest(
            "target-reconstruction",
            rel_digest,
            target,
            attacks.seed,
            attacks.time_limit,
            attacks.node_limit,
        )
        step = Step(f"reconstruction:{m.title}:{target}", digest)
        make = partial(_make_reconstruction, release, attacks, "published", target=target)
        recon = api.read_reconstruction(self.steps.get(step, make) / "recon")
        return self.reidentified(
            recon, release, truth, (f"reidentify:{m.title}:{target}", "reid-target", digest)
        )


NO_BLOCK_ONLY = "not asked for (attacks.block_only reconstructs from the block tables alone too)"


def replicate_of(first: ReleaseResult, point: Point) -> ReleaseResult:
    """A further replicate of a setting whose mechanism drew nothing from its stream: the same
    release, so the first's results, marked as the same (not a draw: left out of means)."""
    sweep = Sweep(
        point.entry, point.setting, point.varied, point.replicate, first.title, point.population
    )
    return replace(first, title=point.title, point=sweep)
