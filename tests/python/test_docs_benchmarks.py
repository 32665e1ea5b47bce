"""docs/benchmarks.md stays a page a user reads top down (issue: "docs a user
can read"): at most 300 lines, and every section that holds figures (a table)
names the command that reproduces them, as an indented command line. The dated
rounds live in docs/benchmarks-history.md."""
from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "benchmarks.md"
# An indented line that runs something: python3 / bash / a program of ours, maybe
# after environment assignments or sudo.
COMMAND = re.compile(r"^    (\S+=\S+ )*(sudo )?(python3|/usr/bin/python3|bash|ps-\w+|build/\S+)\b")


def sections(text: str) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for block in re.split(r"\n(?=## )", text):
        lines = block.splitlines()
        out.append((lines[0], lines[1:]))
    return out


def test_the_page_is_at_most_300_lines():
    assert len(PAGE.read_text().splitlines()) <= 300


def test_every_section_with_figures_names_its_command():
    missing = []
    for title, lines in sections(PAGE.read_text()):
        if not title.startswith("## "):
            continue  # the page's heading: the machines table, no figures
        has_figures = any(line.startswith("| ") and re.search(r"\d", line) for line in lines)
        if has_figures and not any(COMMAND.match(line) for line in lines):
            missing.append(title)
    assert not missing, f"sections with figures but no reproducing command: {missing}"


def test_the_history_is_kept_beside_it():
    history = ROOT / "docs" / "benchmarks-history.md"
    assert history.is_file()
    assert "docs/benchmarks-history.md" in PAGE.read_text()
