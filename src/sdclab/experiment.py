"""Experiments: one TOML file names a population, mechanisms and attacks; one command runs them all.

```toml
[population]
persons = 50000          # a synthetic population ...
seed = 2010
# path = "pop/"          # ... or a population directory

[[mechanisms]]
name = "none"

[[mechanisms]]
name = "psa"
settings = { rate = "0.05" }

[attacks]
reconstruct = true
variability = true
attackers = ["census", "commercial"]
```

Every step writes into ``DIR/steps/<step>-<digest>/``, where the digest covers the step's own
settings and the digests of its inputs; a step whose directory exists is reused, so re-running an
experiment (or extending it by one mechanism) redoes only what changed. ``DIR/results.json`` and
``DIR/report.html`` gather the figures.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sdclab import __version__, protection
from sdclab import evaluation as ev
from sdclab.attacks import linkage
from sdclab.attacks.ckm_risk import ckm_risk
from sdclab.attacks.reconstruction import (
    read_reconstruction,
    read_reconstruction_metrics,
    read_solvar,
    write_reconstruction,
)
from sdclab.attacks.variability import attack
from sdclab.errors import InputError
from sdclab.execution import Executor
from sdclab.fileio import (
    OUTPUT_MARKER,
    atomic_directory,
    atomic_file,
    check_checkpoint_directory,
    check_replaceable,
    read_json_object,
    read_settings_file,
    read_toml,
    write_json,
    write_marker,
    write_parquet,
)
from sdclab.population.io import read_population, write_population
from sdclab.population.synth import synthesize
from sdclab.protection import MECHANISMS
from sdclab.randomness import MAX_SEED, make_rng
from sdclab.release import read_release, write_release
from sdclab.report import render_report

RESULTS_FILE = "results.json"
REPORT_FILE = "report.html"
EXPERIMENT_KIND = "experiment"
EXPERIMENT_ENTRIES = ["steps", RESULTS_FILE, REPORT_FILE]
"""What an experiment's directory may hold besides its marker."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PopulationSpec(_Strict):
    """A synthetic population (persons, seed) or a population directory (path)."""

    persons: int | None = Field(None, ge=100, le=100_000_000)
    seed: int = Field(2010, ge=0, le=MAX_SEED)
    path: str | None = None

    def source(self) -> dict[str, Any]:
        """Where the population came from: a directory, or the synthetic generator's settings
        (a seed is not recorded for a population that was read, since none made it)."""
        if self.path is not None:
            return {"path": self.path}
        return {"persons": self.persons, "seed": self.seed}

    @model_validator(mode="after")
    def _one_source(self) -> PopulationSpec:
        if (self.persons is None) == (self.path is None):
            raise ValueError("give either persons (synthetic) or path (a population directory)")
        return self


class MechanismSpec(_Strict):
    name: str
    settings: dict[str, str | int | float | bool] = Field(default_factory=dict)
    seed: int = Field(1, ge=0, le=MAX_SEED)
    label: str | None = Field(None, pattern=r"^[\w.%+-]{1,64}$")

    @property
    def title(self) -> str:
        return self.label or self.name


class AttackSpec(_Strict):
    reconstruct: bool = True
    variability: bool = True
    attackers: list[Literal["census", "commercial"]] = ["census", "commercial"]
    workers: int | None = Field(None, ge=1)
    executor: str | None = Field(None, description="local, dask://HOST:PORT or dask-local[:N]")
    seed: int = Field(0, ge=0, le=MAX_SEED)
    time_limit: float = Field(300.0, gt=0)


class Experiment(_Strict):
    population: PopulationSpec
    mechanisms: list[MechanismSpec] = Field(min_length=1)
    attacks: AttackSpec = Field(default_factory=lambda: AttackSpec.model_validate({}))

    @model_validator(mode="after")
    def _known_mechanisms(self) -> Experiment:
        titles = [m.title for m in self.mechanisms]
        if len(set(titles)) != len(titles):
            raise ValueError("two mechanisms share a name: give them distinct labels")
        for m in self.mechanisms:
            if m.name not in MECHANISMS:
                raise ValueError(f"unknown mechanism {m.name!r}; known: {', '.join(MECHANISMS)}")
            MECHANISMS[m.name].parse({k: str(v) for k, v in m.settings.items()})
        Executor.parse(self.attacks.executor)  # a bad executor is an input error before any work
        return self


def load_experiment(path: Path) -> Experiment:
    """Read and validate an experiment file; any problem is one clear InputError."""
    data = read_toml(Path(path), "experiment file")
    return parse_experiment(data, str(path), Path(path).parent)


def parse_experiment(data: Any, source: str, base: Path) -> Experiment:
    """Validate an experiment's content (``source`` names it in messages; a relative
    ``population.path`` is taken from ``base``)."""
    population = data.get("population") if isinstance(data, dict) else None
    if isinstance(population, dict) and isinstance(population.get("path"), str):
        population = data["population"] = dict(population)
        shown = repr(population["path"])
        try:
            population["path"] = shown = str((base / population["path"]).resolve())
            is_dir = Path(population["path"]).is_dir()
        except (OSError, ValueError):  # a NUL character, a name too long for the system
            is_dir = False
        if not is_dir:
            raise InputError(f"{source}: population.path: {shown} is not a directory")
    try:
        return Experiment.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "experiment"
        raise InputError(f"{source}: {where}: {first['msg']}") from None
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None


def _digest(*parts: Any) -> str:
    """Digest of a step's settings and inputs (and of the sdclab version that computes it)."""
    text = json.dumps([__version__, *parts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _settings_files_digest(settings: dict[str, str]) -> dict[str, str]:
    """SHA-256 of every file a setting names (a strategy, an iteration file, a p-table), so that
    a step is redone when such a file changes, not only when its path does."""
    digests = {}
    for key, value in settings.items():
        path = Path(value)
        with contextlib.suppress(OSError, ValueError):  # not a path, or not a file
            if path.is_file():
                digests[key] = hashlib.sha256(read_settings_file(path, f"{key} file")).hexdigest()
    return digests


def _directory_digest(path: str | None) -> str | None:
    """SHA-256 of the names and contents of a population directory's files (None: synthetic)."""
    if path is None:
        return None
    digest = hashlib.sha256()
    for file in sorted(Path(path).iterdir()):
        if file.is_file():
            digest.update(file.name.encode() + b"\0")
            with file.open("rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
    return digest.hexdigest()


class Runner:
    """Runs the steps of an experiment, reusing finished steps found on disk."""

    def __init__(self, experiment: Experiment, out: Path, say: Callable[[str], None]) -> None:
        self.experiment = experiment
        self.out = Path(out)
        self.say = say
        self.reused: list[str] = []
        self.computed: list[str] = []
        self.made: list[Path] = []
        """The step directories this run wrote (removed again if the run fails on bad input)."""

    def step(self, name: str, digest: str, make: Callable[[Path], None]) -> Path:
        """The directory of a step, made by ``make`` unless an earlier run left it complete."""
        target = self.out / "steps" / f"{name}-{digest}"
        if (target / ".complete").exists():
            self.reused.append(name)
            return target
        start = time.perf_counter()
        self.say(f"{name} ...")
        with atomic_directory(target) as tmp:
            make(tmp)
            (tmp / ".complete").write_text("")
        self.computed.append(name)
        self.made.append(target)
        self.say(f"{name}: {time.perf_counter() - start:.1f} s")
        return target

    def run(self) -> dict[str, Any]:
        exp = self.experiment
        spec = exp.population
        pop_digest = _digest("population", spec.model_dump(), _directory_digest(spec.path))

        def make_population(tmp: Path) -> None:
            if spec.path is not None:
                population = read_population(Path(spec.path))
                write_population(population, tmp)
            else:
                population, report = synthesize(spec.persons or 0, spec.seed)
                write_population(population, tmp, {"synth.json": report})

        pop_dir = self.step("population", pop_digest, make_population)
        truth = read_population(pop_dir)
        attacks = exp.attacks
        results: dict[str, Any] = {
            "population": {
                "source": spec.source(),
                "persons": truth.n_persons,
                "units": truth.n_units,
                "geography": truth.geography.summary,
            },
            "mechanisms": {},
        }
        for m in exp.mechanisms:
            settings = {k: str(v) for k, v in m.settings.items()}
            files = _settings_files_digest(settings)
            rel_digest = _digest("release", pop_digest, m.name, settings, files, m.seed)

            def make_release(tmp: Path, m: MechanismSpec = m, settings: dict = settings) -> None:
                release = protection.run(m.name, truth, settings, m.seed)
                write_release(release, tmp / "release")

            rel_dir = self.step(f"release:{m.title}", rel_digest, make_release) / "release"
            release = read_release(rel_dir)
            entry: dict[str, Any] = {
                "mechanism": m.name,
                "settings": MECHANISMS[m.name].parse(settings).recorded(),
                "notes": release.notes,
                "specification": release.card.to_dict(),
                "budget": release.card.budget.text(),
            }
            figures = ev.accuracy(release, truth)
            entry["accuracy_by_level"] = ev.summarise_accuracy(figures)
            diagnostics = ev.diagnostics(release, truth)
            if diagnostics:
                entry["diagnostics"] = diagnostics
            persons = release.person_microdata
            if persons is not None and ev.has_person_attributes(persons):
                entry["microdata_agreement"] = ev.agreement(persons, truth)
            if m.name == "geometric":
                entry["tails"] = ev.noise_tails(release, truth)
            if release.group_tables is not None:
                entry["group_accuracy"] = ev.group_accuracy(release, truth)
            if attacks.reconstruct and not release.tables:
                reason = "the release publishes no person tables to reconstruct from"
                entry["reidentification"] = {
                    a: {"not_applicable": reason} for a in attacks.attackers
                }
            if m.name == "cellkey":
                risk_digest = _digest("ckm-risk", rel_digest)

                def make_risk(tmp: Path, release: Any = release) -> None:
                    write_json(ckm_risk(release, truth), tmp / "metrics.json")

                risk_dir = self.step(f"ckm-risk:{m.title}", risk_digest, make_risk)
                entry["ckm_risk"] = read_json_object(risk_dir / "metrics.json")
            if attacks.reconstruct and release.tables:
                rec_digest = _digest(
                    "reconstruction",
                    rel_digest,
                    attacks.seed,
                    attacks.variability,
                    attacks.time_limit,
                )

                def make_recon(tmp: Path, release: Any = release) -> None:
                    recon, metrics, solvar = attack(
                        release,
                        Executor.parse(attacks.executor, attacks.workers),
                        attacks.seed,
                        attacks.time_limit,
                        attacks.variability,
                    )
                    write_reconstruction(tmp / "recon", recon, metrics, solvar)

                rec_dir = self.step(f"reconstruction:{m.title}", rec_digest, make_recon) / "recon"
                recon = read_reconstruction(rec_dir)
                recon_metrics = read_reconstruction_metrics(rec_dir)
                entry["reconstruction"] = recon_metrics
                entry["reconstruction_agreement"] = ev.agreement(recon.persons, truth)
                solvar = read_solvar(rec_dir)
                entry["reidentification"] = {}
                unlinkable = linkage.not_linkable(recon.persons)
                for preset in attacks.attackers:
                    if unlinkable is not None:
                        entry["reidentification"][preset] = {"not_applicable": unlinkable}
                        continue
                    reid_digest = _digest("reid", rec_digest, preset, attacks.seed)

                    def make_reid(
                        tmp: Path,
                        preset: str = preset,
                        recon: Any = recon,
                        release: Any = release,
                        solvar: Any = solvar,
                    ) -> None:
                        params = linkage.ATTACKER_PRESETS[preset]
                        figures_, links = linkage.reidentify(
                            recon.persons, release, truth, params, make_rng(attacks.seed), solvar
                        )
                        write_parquet(links, tmp / "links.parquet")
                        write_json(figures_, tmp / "metrics.json")

                    reid_dir = self.step(f"reidentify:{m.title}:{preset}", reid_digest, make_reid)
                    entry["reidentification"][preset] = read_json_object(reid_dir / "metrics.json")
            entry[ev.EVALUATION_ONLY] = ev.evaluation_only(entry)
            results["mechanisms"][m.title] = entry
        results["steps"] = {"computed": self.computed, "reused": self.reused}
        return results


def run_experiment(
    experiment: Experiment,
    out: Path,
    say: Callable[[str], None],
    protect: tuple[Path, ...] = (),
) -> dict[str, Any]:
    """Run (or finish) an experiment in ``out``; write results.json and report.html.

    ``out`` must be absent, empty or an earlier experiment's directory, apart from the inputs
    (``protect`` and the population directory). A run refused for bad input leaves no step it
    wrote, and a directory it created (or found empty) as it was."""
    out = Path(out)
    inputs = (*protect, *([Path(experiment.population.path)] if experiment.population.path else []))
    check_replaceable(out, EXPERIMENT_KIND, inputs)
    for m in experiment.mechanisms:
        parsed = MECHANISMS[m.name].parse({k: str(v) for k, v in m.settings.items()})
        checkpoint = getattr(parsed, "checkpoint", None)
        if checkpoint is not None:
            check_checkpoint_directory(checkpoint, (*inputs, out))
    created = not out.exists()
    was_empty = not created and not any(out.iterdir())
    out.mkdir(parents=True, exist_ok=True)
    write_marker(out, EXPERIMENT_KIND, EXPERIMENT_ENTRIES)
    runner = Runner(experiment, out, say)
    try:
        results = runner.run()
    except InputError:
        for step in runner.made:
            shutil.rmtree(step, ignore_errors=True)
        if created:
            shutil.rmtree(out, ignore_errors=True)
        elif was_empty:  # the user's empty directory: left as it was
            shutil.rmtree(out / "steps", ignore_errors=True)
            (out / OUTPUT_MARKER).unlink(missing_ok=True)
        raise
    write_json(results, out / RESULTS_FILE)
    with atomic_file(out / REPORT_FILE) as tmp:
        tmp.write_text(render_report(results), encoding="utf-8")
    return results


DEMO = Experiment.model_validate(
    {
        "population": {"persons": 50_000, "seed": 2010},
        "mechanisms": [
            {"name": "none"},
            {"name": "swap-low", "seed": 1},
            {"name": "swap-high", "seed": 2},
            {"name": "psa", "settings": {"rate": "0.05"}, "seed": 3},
            {"name": "topdown", "label": "topdown-dhc", "seed": 4},
            {
                "name": "topdown",
                "label": "topdown-pl94",
                "settings": {"product": "pl94"},
                "seed": 5,
            },
            {
                "name": "cellkey",
                "settings": {"ptable": "maxent", "bound": 5, "variance": 3},
                "seed": 6,
            },
            {"name": "geometric", "settings": {"epsilon": "8"}, "seed": 7},
            {"name": "safetab_h", "seed": 8},
            {"name": "suppress", "settings": {"complementary": "true"}},
        ],
        "attacks": {
            "reconstruct": True,
            "variability": True,
            "attackers": ["census", "commercial"],
        },
    }
)
"""The built-in experiment of ``sdclab demo``."""
