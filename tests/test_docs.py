"""Generated reference docs stay in step with the code they describe."""

from pathlib import Path

from sdclab.population.contract import contract_markdown
from sdclab.tables.catalog import catalog_markdown

DOCS = Path(__file__).parents[1] / "docs"


def test_table_docs_list_the_catalogue():
    assert catalog_markdown() in (DOCS / "tables.md").read_text(), "regenerate docs/tables.md"


def test_data_docs_state_the_contract():
    assert contract_markdown() in (DOCS / "data.md").read_text(), "regenerate docs/data.md"
