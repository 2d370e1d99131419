"""The digests ``release.json`` records: the SHA-256 of every other file of the release and of its
own content. They prove that nothing was changed after the release was written (integrity, not
authenticity)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from sdclab.core.errors import InputError
from sdclab.release.model import RELEASE_FILE

DIGESTS_KEY = "digests"
"""The key of release.json that holds the digests."""
DIGEST_ALGORITHM = "sha256"


def file_digest(file: Path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with Path(file).open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def metadata_digest(meta: dict[str, Any]) -> str:
    """SHA-256 (hex) of release.json's content without its ``digests``, in a canonical form."""
    body = {k: v for k, v in meta.items() if k != DIGESTS_KEY}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


def changed_files(path: Path, meta: dict[str, Any]) -> list[str]:
    """What no longer matches the digests in release.json (every release records them)."""
    if DIGESTS_KEY not in meta:
        return [
            f"{RELEASE_FILE} records no {DIGESTS_KEY} (sdclab records them in every release): it "
            "was edited after the release was written, or is not an sdclab release"
        ]
    file = path / RELEASE_FILE
    digests = meta[DIGESTS_KEY]
    if (
        not isinstance(digests, dict)
        or digests.get("algorithm") != DIGEST_ALGORITHM
        or not isinstance(digests.get("files"), dict)
        or not isinstance(digests.get(RELEASE_FILE), str)
    ):
        raise InputError(
            f"{file}: {DIGESTS_KEY} must be a JSON object with algorithm {DIGEST_ALGORITHM!r}, "
            f"files (name: digest) and {RELEASE_FILE} (the digest of the other keys)"
        )
    changed = []
    for name, recorded in digests["files"].items():
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts or name in ("", RELEASE_FILE):
            raise InputError(f"{file}: {DIGESTS_KEY} names {name!r}, not a file of the release")
        target = path.joinpath(*relative.parts)
        if not isinstance(recorded, str) or not _HEX_DIGEST.fullmatch(recorded):
            raise InputError(f"{file}: the digest of {name} is not a SHA-256 hex digest")
        if not target.is_file():
            changed.append(f"{name} is missing (release.json records its digest)")
        elif file_digest(target) != recorded:
            changed.append(
                f"{name} does not match the digest recorded in {RELEASE_FILE}: it was changed "
                "after the release was written"
            )
    if metadata_digest(meta) != digests[RELEASE_FILE]:
        changed.append(
            f"{RELEASE_FILE} was edited after the release was written (its content does not match "
            "the digest it records)"
        )
    return changed


def unrecorded_files(path: Path, meta: dict[str, Any], files: Sequence[Path]) -> None:
    """Every file the release is read from must have a digest (missing digests: reported by
    :func:`changed_files`)."""
    if DIGESTS_KEY not in meta:
        return
    for file in files:
        name = file.relative_to(path).as_posix()
        if name not in meta[DIGESTS_KEY]["files"]:
            raise InputError(f"release {path}: {RELEASE_FILE} records no digest for {name}")
