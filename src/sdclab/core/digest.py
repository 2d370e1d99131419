"""Keyed digests of confidential inputs.

A release records which input it came from. A plain hash of the confidential files would let anyone
holding the release test a guessed reconstruction against it (for a small area, enumerate the
candidates and compare hashes), so the digest is an HMAC under a key that stays with the agency:
``SDCLAB_DIGEST_KEY`` if set, else a random key created once in ``~/.config/sdclab/digest.key``
(``$XDG_CONFIG_HOME/sdclab/digest.key``).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
import tempfile
from pathlib import Path

import polars as pl

from sdclab.core.errors import InputError

KEY_ENV = "SDCLAB_DIGEST_KEY"
MIN_KEY_LENGTH = 32
"""Fewest bytes a digest key may have (the created key is 64 hex digits: 256 random bits)."""
MAX_KEY_FILE = 4096
"""Most bytes a key file may hold: a key is a line of text, never a device's endless stream."""
REMEDY = "(remove the key file to have a new one made; releases then get new input digests)"
"""What to do about a bad key file."""
MIN_DISTINCT_BYTES = 8
"""Fewest distinct bytes a digest key may have. A key of few distinct bytes — all zeros, one
character repeated, a short pattern — is guessable; 32 random hex digits (16 symbols) have fewer
than 8 distinct ones with probability below 10⁻⁷, 64 (the created key) below 10⁻¹⁸."""


def key_file() -> Path:
    """Where the agency's digest key is kept when ``SDCLAB_DIGEST_KEY`` is not set."""
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "sdclab" / "digest.key"


def digest_key() -> bytes:
    """The agency's digest key: ``SDCLAB_DIGEST_KEY`` if set, else the key file (created with 256
    random bits on first use). An empty, short, degenerate (few distinct bytes) or unreadable key
    is an error, and so is a key file that is no regular file or larger than a key: a digest under
    a guessable key would let anyone test guesses of the confidential input against a release."""
    if KEY_ENV in os.environ:
        where, remedy = f"the environment variable {KEY_ENV}", "(set it to a random key)"
        return _checked(os.environ[KEY_ENV].encode(), where, remedy)
    path = key_file()
    if not os.path.lexists(path):
        _create_key(path)
    return _checked(_read_key_file(path).strip(), f"the digest key file {path}", REMEDY)


def _read_key_file(path: Path) -> bytes:
    """The bytes of the key file: a regular file of at most :data:`MAX_KEY_FILE` bytes (a link to
    /dev/zero was read for ever, a FIFO waited for a writer)."""
    try:  # opened without blocking (a FIFO would wait for a writer), then checked
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb", buffering=0) as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise InputError(f"digest key {path}: cannot be read (not a regular file)")
            key = handle.read(MAX_KEY_FILE + 1)
    except OSError as exc:
        raise InputError(f"digest key {path}: cannot be read ({exc.strerror or exc})") from None
    if len(key) > MAX_KEY_FILE:
        raise InputError(
            f"digest key {path}: larger than {MAX_KEY_FILE} bytes, so not a key file {REMEDY}"
        )
    return key


def _checked(key: bytes, where: str, remedy: str) -> bytes:
    """``key`` unless it is empty, short or degenerate (few distinct bytes); ``where`` names its
    source and ``remedy`` says what to do."""
    if len(key) < MIN_KEY_LENGTH:
        state = "empty" if not key else f"too short ({len(key)} bytes)"
        raise InputError(
            f"{where} is {state}; a digest key needs at least {MIN_KEY_LENGTH} bytes {remedy}"
        )
    distinct = len(set(key))
    if distinct < MIN_DISTINCT_BYTES:
        raise InputError(
            f"{where} has only {distinct} distinct byte{'s' if distinct > 1 else ''} (a key of "
            f"zeros, one character repeated or a short pattern is guessable); a digest key needs "
            f"at least {MIN_DISTINCT_BYTES} distinct bytes {remedy}"
        )
    return key


def _create_key(path: Path) -> None:
    """Write a new random key to ``path`` unless another process got there first.

    The key is written whole to a private temporary file and linked into place; a link never
    replaces an existing file, so concurrent first runs agree on one complete key."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, name = tempfile.mkstemp(prefix=".digest.key.tmp-", dir=path.parent)
    except OSError as exc:
        raise InputError(f"digest key {path}: cannot be created ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "w") as handle:  # mkstemp makes the file readable by its owner only
            handle.write(secrets.token_hex(32))
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(name, path)
    finally:
        os.unlink(name)


def key_id(key: bytes) -> str:
    """A short public name of a digest key (an HMAC of a fixed text: it reveals nothing of the
    key), recorded with every digest so that a digest under another key is told apart."""
    return hmac.new(key, b"sdclab digest key id", hashlib.sha256).hexdigest()[:12]


def frames_digest(*frames: pl.DataFrame, key: bytes | None = None) -> str:
    """HMAC-SHA256 of the frames' column names, types and values (stable across file formats),
    as ``hmac-sha256:<key id>:<hex>``."""
    key = key if key is not None else digest_key()
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for frame in frames:
        mac.update(f"{frame.height}|".encode())
        for name, series in zip(frame.columns, frame.get_columns(), strict=True):
            mac.update(f"{name}:{series.dtype}|".encode())
            if series.dtype == pl.String:
                mac.update("\x00".join(series.fill_null("\x01").to_list()).encode())
            else:
                mac.update(series.is_null().to_numpy().tobytes())
                mac.update(series.cast(pl.Int64).fill_null(0).to_numpy().tobytes())
    return f"hmac-sha256:{key_id(key)}:{mac.hexdigest()}"


def check_same_input(recorded: str, *frames: pl.DataFrame, what: str) -> None:
    """Refuse ``frames`` unless their digest is the ``recorded`` one; the message tells another
    input from the same input under another digest key (``what`` names the two, for the user)."""
    key = digest_key()
    current = frames_digest(*frames, key=key)
    parts = recorded.split(":")
    if current == recorded or (len(parts) == 2 and parts[1] == current.rpartition(":")[2]):
        return  # (a digest without a key id, as releases before key ids recorded them)
    if len(parts) == 2:
        raise InputError(
            f"{what}: not the population the release was made from, or the release was made "
            "under another digest key (its digest records no key id to tell which)"
        )
    if len(parts) != 3 or parts[1] != key_id(key):
        raise InputError(
            f"{what}: the release's input digest was made under another digest key, so the "
            f"population cannot be checked; set {KEY_ENV} to the key of the agency that made it"
        )
    raise InputError(f"{what}: not the population the release was made from (digests differ)")
