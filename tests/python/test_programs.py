"""Where ps-train finds the C++ programs: $PSTRAIN_BUILD_DIR/bin, the checkout's
build/bin, then PATH (an installed PSTrain); the error names every place it looked."""
from __future__ import annotations

import pathlib

import pytest

from pstrain import programs
from pstrain.errors import ProgramNotFound


def stub(folder: pathlib.Path, name: str) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\necho stub\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def no_checkout(tmp_path, monkeypatch) -> pathlib.Path:
    """A checkout without a build folder, no PSTRAIN_BUILD_DIR, and PATH holding only tmp/path."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    monkeypatch.setattr(programs, "REPO_ROOT", checkout)
    monkeypatch.delenv("PSTRAIN_BUILD_DIR", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    return checkout


def test_a_program_on_path_is_found_when_no_build_folder_exists(no_checkout, tmp_path):
    on_path = stub(tmp_path / "path", "ps-net")
    assert programs.find_program("ps-net") == on_path


def test_the_build_folder_comes_before_path(no_checkout, tmp_path, monkeypatch):
    stub(tmp_path / "path", "ps-net")
    built = stub(tmp_path / "mybuild" / "bin", "ps-net")
    monkeypatch.setenv("PSTRAIN_BUILD_DIR", str(tmp_path / "mybuild"))
    assert programs.find_program("ps-net") == built
    monkeypatch.delenv("PSTRAIN_BUILD_DIR")
    checkout_build = stub(no_checkout / "build" / "bin", "ps-net")
    assert programs.find_program("ps-net") == checkout_build


def test_a_missing_program_names_every_place_looked(no_checkout, tmp_path, monkeypatch):
    monkeypatch.setenv("PSTRAIN_BUILD_DIR", str(tmp_path / "mybuild"))
    with pytest.raises(ProgramNotFound) as err:
        programs.find_program("ps-net")
    message = str(err.value)
    assert str(tmp_path / "mybuild" / "bin" / "ps-net") in message
    assert str(no_checkout / "build" / "bin" / "ps-net") in message
    assert "PATH" in message and str(tmp_path / "path") in message
