"""docs/index.md names every guide, paper note and results folder, and every link in it resolves."""

import pathlib
import re

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


def _links() -> set[pathlib.Path]:
    text = (DOCS / "index.md").read_text()
    return {(DOCS / target).resolve() for target in re.findall(r"\]\(([^)#]+)", text)}


def test_the_index_links_every_guide_note_and_results_folder():
    links = _links()
    linked = links | {p.parent for p in links}
    pages = [*DOCS.glob("guides/*.md"), *DOCS.glob("papers/*.md"), DOCS / "architecture.md"]
    missing = sorted(str(p.relative_to(DOCS)) for p in pages if p.resolve() not in links)
    missing += sorted(
        str(p.relative_to(DOCS))
        for p in (DOCS / "results").iterdir()
        if p.is_dir() and p.resolve() not in linked
    )
    assert missing == []


def test_every_link_of_the_index_resolves():
    assert sorted(str(p) for p in _links() if not p.exists()) == []


def test_every_study_has_its_summary():
    folders = [p for p in (DOCS / "results").iterdir() if p.is_dir()]
    assert folders
    assert sorted(p.name for p in folders if not (p / "summary.md").exists()) == []
