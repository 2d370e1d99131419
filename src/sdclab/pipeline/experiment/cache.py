"""The step cache: every step of an experiment lives in ``steps/<title>-<digest>/``, its digest
covering its settings and its inputs' digests, and a step found complete is reused."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sdclab.core.errors import InputError
from sdclab.core.fileio import Modes, atomic_directory, read_settings_file
from sdclab.core.version import __version__
from sdclab.pipeline.experiment.spec import PopulationSpec

MAX_STEP_NAME = 120
"""Characters of a step's title kept in its directory's name."""


STEP_FORMAT = 4
"""Version of what a step holds, in every digest so that a step made by older code is made
again (2: releases carry their mechanism's noise publication, which the noise-aware attack
reads; reconstructions rank their records; 3: releases record whether they protect,
reconstructions which tracts a limit stopped, reidentifications confirm in two passes and score
the vulnerable group; 4: accuracy counts withheld cells at their true counts, reidentifications
link records known to their agebin on agebin only, draw attacker files from data-defined persons
and count the links each confirmation pass confirms)."""


def _digest(*parts: Any) -> str:
    """Digest of a step's settings and inputs (and of the sdclab version and step format that
    compute it)."""
    text = json.dumps([__version__, STEP_FORMAT, *parts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _settings_files_digest(settings: dict[str, Any]) -> dict[str, str]:
    """SHA-256 of every file a setting names (a strategy, an iteration file, a p-table), so that
    a step is redone when such a file changes, not only when its path does."""
    digests = {}
    for key, value in settings.items():
        if not isinstance(value, str):
            continue
        path = Path(value)
        with contextlib.suppress(OSError, ValueError):  # not a path, or not a file
            if path.is_file():
                digests[key] = hashlib.sha256(read_settings_file(path, f"{key} file")).hexdigest()
    return digests


def _file_digest(spec: PopulationSpec) -> str:
    """SHA-256 of a declared census's persons' file (and of its mapping file, if any)."""
    digest = hashlib.sha256()
    if spec.mapping is not None:
        digest.update(read_settings_file(Path(spec.mapping), "mapping file"))
    try:
        with Path(str(spec.path)).open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        reason = exc.strerror or exc
        raise InputError(f"population.path: {spec.path} cannot be read ({reason})") from None
    return digest.hexdigest()


def _directory_digest(path: str | None) -> str | None:
    """SHA-256 of the names and contents of a population directory's files (None: synthetic)."""
    if path is None:
        return None
    digest = hashlib.sha256()
    for file in sorted(Path(path).iterdir()):
        if file.is_file():
            digest.update(file.name.encode() + b"\0")
            try:
                with file.open("rb") as handle:
                    for chunk in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(chunk)
            except OSError as exc:
                raise InputError(
                    f"population.path: {file} cannot be read ({exc.strerror or exc})"
                ) from None
    return digest.hexdigest()


@dataclass(frozen=True)
class Step:
    """One step of an experiment: what it makes, for which mechanism, from which inputs."""

    title: str
    """What it is about: ``release:topdown-dhc``, ``reidentify:psa:census``."""
    digest: str
    """Of its own settings and of the digests of its inputs."""

    def directory(self, root: Path) -> Path:
        """``steps/<title>-<digest>``, the title made safe for a file name (a swept value may
        hold any character; the digest keeps names distinct)."""
        safe = re.sub(r"[^\w.%+@=,#:-]", "_", self.title)[:MAX_STEP_NAME]
        return root / "steps" / f"{safe}-{self.digest}"


@dataclass
class StepCache:
    """The finished steps of an experiment directory: a step found complete is reused."""

    root: Path
    say: Callable[[str], None]
    modes: Modes | None = None
    """The most a step may allow: the source population's (None: a synthetic population)."""
    reused: list[str] = field(default_factory=list)
    computed: list[str] = field(default_factory=list)
    made: list[Path] = field(default_factory=list)
    """The step directories this run wrote (removed again if the run fails on bad input)."""

    def get(self, step: Step, make: Callable[[Path], None]) -> Path:
        """The directory of ``step``, made by ``make`` unless an earlier run left it complete."""
        target = step.directory(self.root)
        if (target / ".complete").exists():
            self.reused.append(step.title)
            return target
        start = time.perf_counter()
        self.say(f"{step.title} ...")
        with atomic_directory(target, self.modes) as tmp:
            make(tmp)
            (tmp / ".complete").write_text("")
        self.computed.append(step.title)
        self.made.append(target)
        self.say(f"{step.title}: {time.perf_counter() - start:.1f} s")
        return target
