"""pycaffe's interface on PSTrain's engine: `import pstrain.caffe as caffe`.

The names, arguments and behaviour of BVLC Caffe's python/caffe (Net, Blob,
Layer for Python layers, the solvers, io, net_spec, draw, coord_map,
Classifier, Detector, caffe_pb2), over the compiled module pstrain._core.
docs/python.md lists where it differs from pycaffe. To make a plain
`import caffe` resolve here, see pstrain.caffe_alias (docs/python.md).
"""
from __future__ import annotations

from .proto.caffe_pb2 import TEST, TRAIN
from . import io
from .net_spec import NetSpec, layers, params, to_proto

try:
    from .pycaffe import (AdaDeltaSolver, AdaGradSolver, AdamSolver, Blob, Layer, Net,
                          NesterovSolver, RMSPropSolver, SGDSolver, Solver, Timer, _core)
except ImportError as _missing:  # no compiled engine: io, net_spec, draw, coord_map still work
    _engine_error = _missing

    def __getattr__(name: str):
        if name in __all__:
            raise ImportError(f"pstrain.caffe.{name} needs the compiled engine: "
                              f"{_engine_error}") from _engine_error
        raise AttributeError(f"module 'pstrain.caffe' has no attribute {name!r}")
else:
    from .classifier import Classifier
    from .detector import Detector
    __version__ = _core.__version__

    set_mode_cpu = _core.set_mode_cpu
    set_mode_gpu = _core.set_mode_gpu
    set_device = _core.set_device
    set_random_seed = _core.set_random_seed
    set_engine = _core.set_engine
    layer_type_list = _core.layer_type_list
    get_solver = _core.get_solver
    init_log = _core.init_log
    log = _core.log
    solver_count = _core.solver_count
    set_solver_count = _core.set_solver_count
    solver_rank = _core.solver_rank
    set_solver_rank = _core.set_solver_rank
    set_multiprocess = _core.set_multiprocess


    def has_nccl() -> bool:
        """False: PSTrain's multi-GPU training goes through its parameter server,
        not NCCL (pstrain.caffe.NCCL runs Caffe's train.py as a bsp job of it)."""
        return False

    from .nccl import NCCL


__all__ = ["AdaDeltaSolver", "AdaGradSolver", "AdamSolver", "Blob", "Classifier", "Detector",
           "Layer", "NCCL", "Net", "NesterovSolver", "NetSpec", "RMSPropSolver", "SGDSolver",
           "Solver", "TEST", "TRAIN", "Timer", "get_solver", "has_nccl", "init_log", "io",
           "layer_type_list", "layers", "log", "params", "set_device", "set_engine",
           "set_mode_cpu", "set_mode_gpu", "set_multiprocess", "set_random_seed",
           "set_solver_count", "set_solver_rank", "solver_count", "solver_rank", "to_proto"]
