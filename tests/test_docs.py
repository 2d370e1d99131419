"""Generated reference docs stay in step with the code they describe."""

import re
import subprocess
import sys
from pathlib import Path

from sdclab.censuses.us2010.catalog import catalog_markdown
from sdclab.censuses.us2010.population.contract import contract_markdown

DOCS = Path(__file__).parents[1] / "docs"


def test_table_docs_list_the_catalogue():
    assert catalog_markdown() in (DOCS / "tables.md").read_text(), "regenerate docs/tables.md"


def test_data_docs_state_the_contract():
    assert contract_markdown() in (DOCS / "data.md").read_text(), "regenerate docs/data.md"


def python_blocks(page: Path) -> list[str]:
    """The ```python code blocks of a Markdown page, in order."""
    return re.findall(r"^```python\n(.*?)^```$", page.read_text(), flags=re.S | re.M)


def test_the_python_guide_runs_as_a_plain_script(tmp_path):
    # every block, in order, as one script without a main guard (as a notebook runs them):
    # the guide cannot rot, and the worker processes it starts must not re-run it
    blocks = python_blocks(DOCS / "python.md")
    assert len(blocks) >= 6
    script = tmp_path / "guide.py"
    script.write_text("\n".join(blocks))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "P1 block MAE" in done.stdout and "vulnerable:" in done.stdout
    assert done.stdout.count("<mechanism ") >= 10  # sdclab.mechanisms() printed every one


def test_the_census_guide_runs_and_shows_what_census_show_prints():
    page = DOCS / "census.md"
    script = "\n".join(python_blocks(page))
    root = DOCS.parent
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=root, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "297 persons; T2 has 20 cells in 4 districts" in done.stdout
    assert "{'A2': 73, 'K7': 141, 'B9': 32, 'Q1': 51}" in done.stdout  # as the guide says
    # the experiment over the census: its file is the one shown, its output the one quoted
    experiment = (root / "examples" / "toyland" / "experiment.toml").read_text()
    shown_toml = re.findall(r"^```toml\n(.*?)^```$", page.read_text(), flags=re.S | re.M)
    assert shown_toml[-1] in experiment
    assert "census toyland: 8 releases" in done.stdout
    for line in done.stdout.splitlines()[-5:]:
        assert f"`{line}`" in page.read_text()
    shown = subprocess.run(
        [sys.executable, "-m", "sdclab", "census", "show", "examples/toyland/census.toml"],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert shown.returncode == 0 and shown.stdout.strip() in page.read_text()
