"""What a run writes holds no secret; checkpoints belong to one run; the exact release is never
marked fit for publication; the digest key is never empty, short or raced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import sdclab.core.randomness as randomness
from sdclab import protection
from sdclab.censuses.us2010.population.io import write_population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.cli import app
from sdclab.core.errors import InputError
from sdclab.protection.cellkey import assign_record_keys
from sdclab.protection.topdown_engine import topdown
from sdclab.protection.topdown_strategy import PRODUCTION, PRODUCTS

ENTROPY = 0x9E3779B9_7F4A7C15_F39CC060_5CEDC834
"""The OS entropy every unseeded run of these tests gets (digits without a pattern that file
encodings produce by themselves, such as the nibbles 0, 1, 2, … bit-packed)."""
QUICK = {
    "psa": [],
    "swap": [],
    "topdown": ["product=pl94", "workers=2"],  # spawned workers: their output is searched too
    "cellkey": ["keys=drawn", "spsn=false"],
    "geometric": ["epsilon=8"],
    "safetab_h": [],
}
"""Every mechanism that draws from its random stream, with settings that run in seconds."""


def _words(value: int, bits: int) -> list[bytes]:
    """``value`` as raw integers of ``bits`` bits, both byte orders, and its 32-bit words."""
    width = (value.bit_length() + 7) // 8 or 1
    raw = [value.to_bytes(max(width, bits // 8), order) for order in ("little", "big")]
    words = [(value >> s) & 0xFFFFFFFF for s in range(0, value.bit_length(), 32)]
    raw += [w.to_bytes(4, "little") for w in words if w > 0xFFFF]
    return raw


def secret_patterns(entropy: int) -> dict[str, bytes]:
    """Every form in which ``entropy``, or what a run derives from it, could be written."""
    rng = randomness.make_rng(entropy)
    state = rng.bit_generator.state["state"]
    derived = int(rng.integers(2**62)) << 64 | int(rng.integers(2**62))  # TopDown's entropy
    forms: dict[str, bytes] = {}
    for name, value in {
        "entropy": entropy,
        "topdown entropy": derived,
        "generator state": state["state"],
        "generator increment": state["inc"],
    }.items():
        forms[f"{name} (decimal)"] = str(value).encode()
        forms[f"{name} (hex)"] = f"{value:x}".encode()
        forms[f"{name} (HEX)"] = f"{value:X}".encode()
        for i, raw in enumerate(_words(value, 128)):
            forms[f"{name} (raw {i})"] = raw
    forms["topdown entropy high word"] = (derived >> 64).to_bytes(8, "little")
    forms["topdown entropy low word"] = (derived & (2**64 - 1)).to_bytes(8, "little")
    return forms


def leaks(root: Path, logs: str, patterns: dict[str, bytes]) -> list[str]:
    """The (file, form) pairs where a secret appears in a file under ``root`` or in the logs."""
    found = []
    files = [p for p in root.rglob("*") if p.is_file()]
    for path in files:
        data = path.read_bytes()
        found += [f"{path.relative_to(root)}: {n}" for n, p in patterns.items() if p in data]
    found += [f"logs: {n}" for n, p in patterns.items() if p in logs.encode()]
    return found


@pytest.fixture(scope="module")
def population_dir(tmp_path_factory) -> Path:
    population = synthesize(2_000, seed=21)
    path = tmp_path_factory.mktemp("pop") / "pop"
    write_population(assign_record_keys(population, 256, np.random.default_rng(1)), path)
    return path


@pytest.fixture
def fixed_entropy(monkeypatch):
    monkeypatch.setattr(randomness.secrets, "randbits", lambda bits: ENTROPY)
    return ENTROPY


def test_the_patterns_find_the_entropy_where_it_is_written(tmp_path):
    """The search itself can fail: each way of writing the secret is found."""
    patterns = secret_patterns(ENTROPY)
    (tmp_path / "a.json").write_text(json.dumps({"key": f"{ENTROPY}-dhc-15.3-block"}))
    np.savez(tmp_path / "b.npz", state=np.array([ENTROPY & (2**64 - 1)], dtype=np.uint64))
    found = leaks(tmp_path, "", patterns)
    assert any(f.startswith("a.json: entropy (decimal)") for f in found)
    assert any(f.startswith("b.npz: entropy (raw") for f in found)
    (tmp_path / "a.json").unlink()
    (tmp_path / "b.npz").unlink()
    assert leaks(tmp_path, f"seed {ENTROPY:x}", patterns) == ["logs: entropy (hex)"]


@pytest.mark.parametrize("mechanism", sorted(QUICK))
def test_no_unseeded_run_writes_its_entropy(
    mechanism, population_dir, tmp_path, fixed_entropy, capfd
):
    out = tmp_path / "rel"
    args = ["protect", str(population_dir), "-m", mechanism, "--out", str(out)]
    for setting in QUICK[mechanism]:
        args += ["--set", setting]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    meta = json.loads((out / "release.json").read_text())
    assert meta["randomness"] == {
        "source": "os-entropy",
        "fit_for_publication": True,
        "drew_from_stream": True,
    }
    logs = result.output + "".join(capfd.readouterr())
    assert leaks(tmp_path, logs, secret_patterns(fixed_entropy)) == []


def test_unseeded_synth_writes_no_entropy(tmp_path, fixed_entropy):
    result = CliRunner().invoke(app, ["synth", "-n", "500", "--out", str(tmp_path / "pop")])
    assert result.exit_code == 0, result.output
    assert leaks(tmp_path, result.output, secret_patterns(fixed_entropy)) == []


def test_an_unseeded_run_may_not_keep_checkpoints(population_dir, tmp_path, fixed_entropy):
    checkpoint = tmp_path / "ck"
    args = ["protect", str(population_dir), "-m", "topdown", "--set", "product=pl94"]
    args += ["--set", f"checkpoint={checkpoint}", "--out", str(tmp_path / "rel")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "checkpoint needs a seed" in result.output
    assert not checkpoint.exists() and not (tmp_path / "rel").exists()


def test_checkpoints_of_a_seeded_run_hold_no_entropy(population_dir, tmp_path):
    """The checkpoint key is a digest: not even the entropy a seed derives is written."""
    checkpoint = tmp_path / "ck"
    args = ["protect", str(population_dir), "-m", "topdown", "--set", "product=pl94"]
    args += ["--set", f"checkpoint={checkpoint}", "--seed", "7", "--out", str(tmp_path / "rel")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert {p.name for p in checkpoint.iterdir()} >= {"nation", "block"}
    derived = {k: v for k, v in secret_patterns(7).items() if not k.startswith("entropy")}
    assert leaks(checkpoint, "", derived) == []  # (the seed itself is in release.json anyway)


def _strategy_file(path: Path) -> Path:
    """The production pl94 shares, with the block level's two queries' shares swapped."""
    lines = [f'rho = "{PRODUCTION.rho}"', "[level_shares]"]
    lines += [f'{lv} = "{share}"' for lv, share in PRODUCTION.level_shares.items()]
    for level, shares in PRODUCTION.query_shares.items():
        lines.append(f"[query_shares.{level}]")
        items = list(shares.items())
        if level == "block":
            (q0, s0), (q1, s1) = items[0], items[1]
            items[0], items[1] = (q0, s1), (q1, s0)
        lines += [f'"{q}" = "{s}"' for q, s in items]
    path.write_text("\n".join(lines))
    return path


def test_a_checkpoint_is_refused_for_another_population_strategy_or_layout(tmp_path):
    product = PRODUCTS["pl94"]
    first = synthesize(1_500, seed=31)
    other = synthesize(1_500, seed=32)
    checkpoint = tmp_path / "ck"
    topdown(first, product, PRODUCTION, randomness.make_rng(3), workers=1, checkpoint=checkpoint)

    def again(population, strategy=PRODUCTION, keep=True):
        rng = randomness.make_rng(3)
        topdown(
            population,
            product,
            strategy,
            rng,
            workers=1,
            keep_measurements=keep,
            checkpoint=checkpoint,
        )

    again(first)  # the same run resumes
    shuffled = protection.get("topdown").parse(
        {"product": "pl94", "strategy": str(_strategy_file(tmp_path / "s.toml"))}
    )
    _, strategy = shuffled.resolve()
    assert strategy.total_rho() == PRODUCTION.total_rho() and strategy != PRODUCTION
    for case in (
        {"population": other},
        {"population": first, "strategy": strategy},
        {"population": first, "keep": False},
    ):
        with pytest.raises(InputError, match="belongs to another run"):
            again(**case)


def test_exact_and_deterministic_releases_say_what_their_randomness_is(population_dir, tmp_path):
    exact = "(not fit for publication: an exact tabulation protects nothing)"
    for mechanism, fit in (("none", exact), ("suppress", None)):
        out = tmp_path / mechanism
        result = CliRunner().invoke(
            app, ["protect", str(population_dir), "-m", mechanism, "--out", str(out)]
        )
        assert result.exit_code == 0, result.output
        record = json.loads((out / "release.json").read_text())["randomness"]
        assert record["source"] == "none (deterministic)"
        assert record["fit_for_publication"] is (fit is None)
        assert (fit in result.output) if fit else "not fit" not in result.output


# ---------------------------------------------------------------------------------------------
# The digest key
# ---------------------------------------------------------------------------------------------


def _key_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SDCLAB_DIGEST_KEY"}
    return {**env, "XDG_CONFIG_HOME": str(tmp_path / "config")}


@pytest.mark.parametrize("key", ["", "short key"])
def test_an_empty_or_short_key_is_refused(key, monkeypatch):
    from sdclab.core.digest import digest_key

    monkeypatch.setenv("SDCLAB_DIGEST_KEY", key)
    with pytest.raises(InputError, match="empty|too short"):
        digest_key()


def test_an_empty_or_unreadable_key_file_is_refused(tmp_path, monkeypatch):
    from sdclab.core.digest import digest_key, key_file

    monkeypatch.delenv("SDCLAB_DIGEST_KEY")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    created = digest_key()
    assert len(created) == 64 and key_file().stat().st_mode & 0o077 == 0
    assert digest_key() == created
    key_file().write_text("\n")
    with pytest.raises(InputError, match="digest key file .* is empty"):
        digest_key()
    key_file().unlink()
    key_file().mkdir()
    with pytest.raises(InputError, match="cannot be read"):
        digest_key()


@pytest.mark.parametrize("key", ["0" * 32, "ab" * 32, "abcdefg" * 10])
def test_a_degenerate_key_is_refused(key, monkeypatch, tmp_path):
    from sdclab.core.digest import digest_key

    monkeypatch.setenv("SDCLAB_DIGEST_KEY", key)  # 32 zeros used to be taken
    with pytest.raises(InputError, match=r"has only [1-7] distinct bytes? .* at least 8 distinct"):
        digest_key()
    population = Path(__file__).parent / "data" / "good" / "population" / "base_csv"
    result = CliRunner().invoke(app, ["tabulate", str(population), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "SDCLAB_DIGEST_KEY has only" in result.output and not (tmp_path / "o").exists()


def test_a_key_file_that_is_no_regular_file_or_too_large_is_refused(tmp_path, monkeypatch):
    from sdclab.core.digest import digest_key, key_file

    monkeypatch.delenv("SDCLAB_DIGEST_KEY")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    key_file().parent.mkdir(parents=True)
    key_file().symlink_to("/dev/zero")  # was read until memory ran out (1.5 GB)
    with pytest.raises(InputError, match="digest.key: cannot be read .not a regular file"):
        digest_key()
    key_file().unlink()
    os.mkfifo(key_file())  # waited for a writer for ever
    with pytest.raises(InputError, match="digest.key: cannot be read .not a regular file"):
        digest_key()
    key_file().unlink()
    key_file().write_text("0123456789abcdef" * 1000)
    with pytest.raises(InputError, match="digest.key: larger than 4096 bytes"):
        digest_key()
    key_file().write_bytes(bytes(32))
    with pytest.raises(InputError, match="digest.key has only 1 distinct byte"):
        digest_key()


def test_concurrent_first_runs_agree_on_one_complete_key(tmp_path):
    code = "from sdclab.core.digest import digest_key; print(digest_key().decode())"
    env = _key_env(tmp_path)
    runs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    keys = {run.communicate()[0].strip() for run in runs}
    assert all(run.returncode == 0 for run in runs)
    assert len(keys) == 1 and len(keys.pop()) == 64
    assert [p.name for p in (tmp_path / "config" / "sdclab").iterdir()] == ["digest.key"]


# ---------------------------------------------------------------------------------------------
# Bounded work on small inputs; the truth a release is compared with
# ---------------------------------------------------------------------------------------------


def test_a_setting_naming_a_fifo_or_a_huge_file_is_refused_at_once(tmp_path):
    from sdclab.core import fileio

    fifo = tmp_path / "strategy.toml"
    os.mkfifo(fifo)  # opening it for reading would block until a writer came
    with pytest.raises(InputError, match="strategy.toml: the strategy file is not a regular"):
        protection.get("topdown").parse({"strategy": str(fifo)})
    huge = tmp_path / "exp.toml"
    with huge.open("wb") as handle:
        handle.truncate(fileio.SETTINGS_FILE_LIMIT + 1)
    result = CliRunner().invoke(app, ["run", str(huge), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "larger than 16 MiB" in result.output


def test_evaluate_and_reidentify_check_the_truth(population_dir, tmp_path, monkeypatch):
    rel, recon = tmp_path / "rel", tmp_path / "recon"
    invoke = CliRunner().invoke
    assert invoke(app, ["tabulate", str(population_dir), "--out", str(rel)]).exit_code == 0
    made = invoke(app, ["reconstruct", str(rel), "--workers", "1", "--out", str(recon)])
    assert made.exit_code == 0, made.output
    other = synthesize(2_000, seed=22)
    write_population(other, tmp_path / "other")
    keyed = tmp_path / "keyed"
    assert (
        invoke(
            app, ["protect", str(population_dir), "-m", "cellkey", "--out", str(keyed)]
        ).exit_code
        == 0
    )
    commands = {
        "evaluate": ["evaluate", str(rel)],
        "reidentify": ["reidentify", str(recon), "--attacker", "census"],
        "ckm-risk": ["ckm-risk", str(keyed)],
    }
    for name, args in commands.items():
        result = invoke(
            app, [*args, "--truth", str(tmp_path / "other"), "--out", str(tmp_path / name)]
        )
        assert result.exit_code == 2, result.output
        assert "not the population the release was made from" in result.output, result.output
        assert not (tmp_path / name).exists()
    monkeypatch.setenv("SDCLAB_DIGEST_KEY", "another agency's key, 32 bytes or more")
    result = invoke(
        app, [*commands["evaluate"], "--truth", str(population_dir), "--out", str(tmp_path / "e")]
    )
    assert result.exit_code == 2 and "made under another digest key" in result.output
    monkeypatch.undo()
    result = invoke(
        app, [*commands["evaluate"], "--truth", str(population_dir), "--out", str(tmp_path / "e")]
    )
    assert result.exit_code == 0, result.output


def test_an_experiment_s_steps_and_logs_hold_nothing_its_seeds_derive(tmp_path):
    experiment = tmp_path / "exp.toml"
    experiment.write_text(
        "[population]\npersons = 400\nseed = 5\n\n"
        '[[mechanisms]]\nname = "topdown"\nsettings = { product = "pl94" }\nseed = 11\n\n'
        '[[mechanisms]]\nname = "geometric"\nsettings = { epsilon = "8" }\nseed = 12\n\n'
        '[attacks]\nreconstruct = true\nvariability = false\nattackers = ["census"]\n'
    )
    result = CliRunner().invoke(app, ["run", str(experiment), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert any((tmp_path / "out" / "steps").iterdir())
    for seed in (5, 11, 12):
        derived = {k: v for k, v in secret_patterns(seed).items() if not k.startswith("entropy")}
        assert leaks(tmp_path / "out", result.output, derived) == [], seed
