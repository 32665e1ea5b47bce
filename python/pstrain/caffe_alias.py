"""Opt-in: make a plain `import caffe` load pstrain.caffe, so pycaffe scripts run
with no change at all (`from caffe.proto import caffe_pb2`, `from caffe import
layers as L, params as P` included).

    python3 -m pstrain.caffe_alias install     # once; writes pstrain-caffe-alias.pth
    python3 -m pstrain.caffe_alias uninstall   # takes it out again
    python3 -m pstrain.caffe_alias status
    (each takes --site DIR to use another site-packages folder)

`install` refuses when Python already finds another `caffe` (a real Caffe) and
names it. Even once installed, the alias only answers when nothing earlier on
sys.path provides `caffe`: its finder sits at the end of sys.meta_path, so a
Caffe installed later still wins. The alias is the same module object:
`caffe.Net is pstrain.caffe.Net`.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import pathlib
import site
import sys
import sysconfig

_ALIAS = "caffe"
_TARGET = "pstrain.caffe"
PTH_NAME = "pstrain-caffe-alias.pth"


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self._target = target

    def create_module(self, spec):
        module = importlib.import_module(self._target)
        if spec.name == _ALIAS and not any(isinstance(f, _SubmoduleFinder)
                                           for f in sys.meta_path):
            sys.meta_path.insert(0, _SubmoduleFinder())
        return module

    def exec_module(self, module) -> None:
        pass  # the target module is already loaded


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds `caffe` and `caffe.<sub>` as pstrain.caffe and pstrain.caffe.<sub>."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _ALIAS and not fullname.startswith(_ALIAS + "."):
            return None
        real = _TARGET + fullname[len(_ALIAS):]
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real))


class _SubmoduleFinder(importlib.abc.MetaPathFinder):
    """Once `caffe` is pstrain.caffe, `caffe.<sub>` is pstrain.caffe.<sub>, the same
    module object. It goes first on sys.meta_path (put there when the alias loads
    `caffe`): the package's __path__ would otherwise let the path finder load a
    second copy of each submodule named caffe.<sub> (`from caffe.coord_map import
    crop` then built layers with another net_spec than `caffe.layers`, and its own
    type checks refused them)."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(_ALIAS + "."):
            return None
        if sys.modules.get(_ALIAS) is not sys.modules.get(_TARGET):
            return None  # another caffe was imported: not ours to answer
        return _AliasFinder().find_spec(fullname)


def find_spec(fullname: str):
    """The alias spec for `caffe` or `caffe.<sub>`, else None (the .pth hook's entry)."""
    return _AliasFinder().find_spec(fullname)


# The line the .pth file holds: at start-up it only appends a tiny finder; this
# module (and pstrain) is imported when, and only when, `caffe` is imported.
_PTH_LINE = ('import sys; sys.meta_path.append(type("PstrainCaffeAlias", (), {"find_spec": '
             'staticmethod(lambda name, path=None, target=None: '
             '__import__("pstrain.caffe_alias", fromlist=["find_spec"]).find_spec(name) '
             'if name == "caffe" or name.startswith("caffe.") else None)})())\n')


def enable() -> None:
    """Installs the finder in this process (what the .pth file runs at start-up)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(_AliasFinder())


def _other_caffe() -> str | None:
    """Where another `caffe` package is found, if any."""
    for finder in sys.meta_path:
        if (isinstance(finder, _AliasFinder) or type(finder).__name__ == "PstrainCaffeAlias" or
                not hasattr(finder, "find_spec")):
            continue
        spec = finder.find_spec(_ALIAS, None)
        if spec is not None:
            return spec.origin or str(spec.submodule_search_locations)
    return None


def _pth_path() -> pathlib.Path:
    purelib = sysconfig.get_paths()["purelib"]
    if not pathlib.Path(purelib).is_dir() or not _writable(purelib):
        purelib = site.getusersitepackages()
    return pathlib.Path(purelib) / PTH_NAME


def _writable(folder: str) -> bool:
    import os
    return os.access(folder, os.W_OK)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    pth = _pth_path()
    if "--site" in args:  # another site folder than this Python's own (tests, virtual envs)
        i = args.index("--site")
        if i + 1 >= len(args):
            print("pstrain.caffe_alias: --site needs a folder", file=sys.stderr)
            return 2
        pth = pathlib.Path(args[i + 1]) / PTH_NAME
        del args[i:i + 2]
    command = args[0] if args else "status"
    if command == "install":
        other = _other_caffe()
        if other is not None:
            print(f"pstrain.caffe_alias: refusing: Python already imports a caffe from {other}; "
                  "use `import pstrain.caffe as caffe` in your scripts instead", file=sys.stderr)
            return 1
        pth.parent.mkdir(parents=True, exist_ok=True)
        pth.write_text(_PTH_LINE)
        print(f"pstrain.caffe_alias: installed {pth}: `import caffe` now loads pstrain.caffe")
        return 0
    if command == "uninstall":
        if pth.exists():
            pth.unlink()
            print(f"pstrain.caffe_alias: removed {pth}")
        else:
            print(f"pstrain.caffe_alias: not installed ({pth} does not exist)")
        return 0
    if command == "status":
        other = _other_caffe()
        state = "installed" if pth.exists() else "not installed"
        print(f"pstrain.caffe_alias: {state} ({pth})" +
              (f"; another caffe is found first: {other}" if other else ""))
        return 0
    print("usage: python3 -m pstrain.caffe_alias install|uninstall|status", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
