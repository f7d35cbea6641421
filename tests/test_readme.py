"""The README reads in five minutes: at most 120 lines, none over 200 characters, and its
quickstart is the two commands CI and a new user run."""

import pathlib

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= 120
    assert [n for n, line in enumerate(lines, 1) if len(line) > 200] == []


def test_the_quickstart_is_train_and_test():
    quickstart = README.read_text().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = quickstart.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["./dev.sh train", "./dev.sh test"]
