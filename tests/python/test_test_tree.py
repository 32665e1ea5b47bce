"""The test tree itself: `pytest tests` (the README's test command) imports every test
module by its base name (rootdir-relative, no packages), so two modules of one name in
different folders stop the collection of the whole suite ("import file mismatch")."""
from __future__ import annotations

import collections
import pathlib

TESTS = pathlib.Path(__file__).resolve().parents[1]


def duplicate_module_names(root: pathlib.Path) -> dict[str, list[str]]:
    """Base names of test modules (and conftest-free helpers pytest imports alike) found
    in more than one folder below root, with the folders."""
    seen: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(root.rglob("test_*.py")):
        if "__pycache__" in path.parts or ".hypothesis" in path.parts:
            continue
        seen[path.name].append(str(path.parent.relative_to(root)))
    return {name: folders for name, folders in seen.items() if len(folders) > 1}


def test_every_test_module_name_is_unique_across_the_test_folders():
    assert duplicate_module_names(TESTS) == {}


def test_the_check_sees_a_name_used_twice(tmp_path):
    for folder in ("python", "e2e"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "test_same.py").write_text("")
    (tmp_path / "e2e" / "test_other.py").write_text("")
    assert duplicate_module_names(tmp_path) == {"test_same.py": ["e2e", "python"]}
