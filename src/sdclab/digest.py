"""Keyed digests of confidential inputs.

A release records which input it came from. A plain hash of the confidential files would let anyone
holding the release test a guessed reconstruction against it (for a small area, enumerate the
candidates and compare hashes), so the digest is an HMAC under a key that stays with the agency:
``SDCLAB_DIGEST_KEY`` if set, else a random key created once in ``~/.config/sdclab/digest.key``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

import polars as pl

KEY_ENV = "SDCLAB_DIGEST_KEY"


def digest_key() -> bytes:
    """The agency's digest key (created with 256 random bits on first use)."""
    if os.environ.get(KEY_ENV):
        return os.environ[KEY_ENV].encode()
    path = (
        Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "sdclab" / "digest.key"
    )
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32))
    return path.read_text().strip().encode()


def frames_digest(*frames: pl.DataFrame, key: bytes | None = None) -> str:
    """HMAC-SHA256 of the frames' column names, types and values (stable across file formats)."""
    mac = hmac.new(key if key is not None else digest_key(), digestmod=hashlib.sha256)
    for frame in frames:
        mac.update(f"{frame.height}|".encode())
        for name, series in zip(frame.columns, frame.get_columns(), strict=True):
            mac.update(f"{name}:{series.dtype}|".encode())
            if series.dtype == pl.String:
                mac.update("\x00".join(series.fill_null("\x01").to_list()).encode())
            else:
                mac.update(series.is_null().to_numpy().tobytes())
                mac.update(series.cast(pl.Int64).fill_null(0).to_numpy().tobytes())
    return "hmac-sha256:" + mac.hexdigest()
