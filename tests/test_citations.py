"""Every note the code and docs cite is in the repository, and every link into a note resolves.

Comments cite the project's notes as `docs/papers/<paper>.md#<heading>` or
`docs/architecture.md#<heading>`; markdown files link them relatively. This test reads every
source and doc file a clone holds and fails on a citation a reader of the clone cannot follow: a
path outside the repository, a bare `<paper>.md §N` section of a document the repository does not
hold, a linked file that does not exist, or an anchor that names no heading of its file.
"""

import collections
import pathlib
import re
import unicodedata

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SKIPPED_DIRS = {".git", ".venv", "runs", "__pycache__", ".pytest_cache", ".ruff_cache"}
SUFFIXES = {".py", ".md", ".sh", ".toml", ".txt", ".cfg"}

OUTSIDE = re.compile(r"\.\./shared|/work/shared|\bDESIGN(?:\.md\b| §)")
# A paper's note or guide named without its folder (`dice.md §4.3`): allowed only inside a path
# (`docs/guides/dice.md`, `papers/dice.md`) or a markdown link (`[dice.md](..)`, relative to its
# file).
BARE_NOTE = re.compile(r"(?<!/)(?<!\]\()(?<!\[`)(?<!\[)\b(?:impala|reactor|dice|gdi|lbc)\.md\b")
# A link into a markdown file: `docs/papers/dice.md#errata`, `](papers/dice.md#errata)`,
# `](../architecture.md)`.
LINK = re.compile(r"((?:\.\./|[\w.-]+/)*[\w.-]+\.md)(?:#([\w-]+))?")


def _files():
    for path in sorted(ROOT.rglob("*")):
        relative = path.relative_to(ROOT)
        if any(part in SKIPPED_DIRS for part in relative.parts) or not path.is_file():
            continue
        if path.suffix in SUFFIXES and path != pathlib.Path(__file__).resolve():
            yield path


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    kept = []
    for char in heading.strip().lower():
        if char in " -_" or unicodedata.category(char)[0] in "LN":
            kept.append("-" if char == " " else char)
    return "".join(kept)


def anchors(markdown: pathlib.Path) -> set[str]:
    """Every heading's anchor in a markdown file; repeated headings get -1, -2, ... as on GitHub."""
    seen = collections.Counter()
    result = set()
    in_fence = False
    for line in markdown.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        match = None if in_fence else re.match(r"#{1,6} (.*)", line)
        if match:
            base = slug(match.group(1))
            result.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
            seen[base] += 1
    return result


def test_slug_follows_githubs_rule():
    assert slug("Worked test numbers") == "worked-test-numbers"
    assert slug("Behaviour selection: the bandits controller (App. G)") == (
        "behaviour-selection-the-bandits-controller-app-g"
    )
    assert (
        slug("Replay patterns (`common/replay/patterns.py`)")
        == "replay-patterns-commonreplaypatternspy"
    )
    assert slug("Table 20 ablations: how we read them") == "table-20-ablations-how-we-read-them"


def _problems(path: pathlib.Path, text: str) -> list[str]:
    problems = []
    name = path.relative_to(ROOT)
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{name}:{number}"
        if OUTSIDE.search(line):
            problems.append(f"{where}: cites a file outside the repository: {line.strip()}")
        if BARE_NOTE.search(line):
            problems.append(f"{where}: names a note without its folder: {line.strip()}")
        for match in LINK.finditer(line):
            target, anchor = match.group(1), match.group(2)
            if "/" not in target and not line[: match.start()].endswith("]("):
                continue  # a bare name is BARE_NOTE's concern (or not a note, e.g. README.md)
            candidates = [path.parent / target, ROOT / target]
            found = next((c.resolve() for c in candidates if c.is_file()), None)
            if found is None:
                problems.append(f"{where}: links {target}, which the repository does not hold")
            elif anchor and anchor not in anchors(found):
                problems.append(f"{where}: {target} has no heading with anchor #{anchor}")
    return problems


def test_every_citation_resolves_inside_the_repository():
    problems = []
    for path in _files():
        problems += _problems(path, path.read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


PROBE = ROOT / "tests" / "probe.py"  # where the lines below pretend to be written
# A path outside the checkout, joined here so that no line of the repository names one.
OUTSIDE_PATH = "/".join(["..", "shared", "papers", "gdi.md"])


@pytest.mark.parametrize(
    "line, expected",
    [
        ("# dice.md §4.3: 160 envs", "without its folder"),
        (f"# see {OUTSIDE_PATH}", "outside the repository"),
        ("# DESIGN.md §4", "outside the repository"),
        ("# as DESIGN §3 says", "outside the repository"),
        ("# docs/papers/lbc.md#no-such-heading", "no heading with anchor"),
        ("# docs/papers/nowhere.md", "does not hold"),
        ("see [the notes](papers/dice.md#errata)", "does not hold"),
    ],
)
def test_the_check_catches_each_kind_of_broken_citation(line, expected):
    """The scan is not vacuous: each kind of broken citation is reported."""
    assert any(expected in problem for problem in _problems(PROBE, line))


def test_good_citations_pass():
    line = (
        "# DiCE Table 5; docs/papers/dice.md#departures-from-the-paper, "
        "[map](docs/architecture.md#data-flow), README.md"
    )
    assert _problems(PROBE, line) == []
