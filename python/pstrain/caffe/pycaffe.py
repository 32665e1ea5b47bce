"""pycaffe's Python side over pstrain._core: the dictionaries and conveniences
BVLC Caffe's python/caffe/pycaffe.py adds to the compiled Net (blobs, params,
forward with named inputs, batching, ...), with the same names, arguments and
results. Every computation is the engine's; nothing here runs a layer.
"""
from __future__ import annotations

import collections
import itertools
import time
from typing import Any, Iterator

import numpy as np

from .._native import core

_core = core()
Net = _core.Net
Blob = _core.Blob
Solver = _core.Solver
SGDSolver = _core.SGDSolver
NesterovSolver = _core.NesterovSolver
AdaGradSolver = _core.AdaGradSolver
RMSPropSolver = _core.RMSPropSolver
AdaDeltaSolver = _core.AdaDeltaSolver
AdamSolver = _core.AdamSolver


# pycaffe caches these dictionaries on the net; here they are built at each
# access: blobs cached on their net would keep it alive forever (each blob
# handle keeps its net alive, a cycle the garbage collector cannot see).


@property
def _net_blobs(self) -> collections.OrderedDict:
    """Every blob by name, input to output."""
    return collections.OrderedDict(zip(self._blob_names, self._blobs))


@property
def _net_blob_loss_weights(self) -> collections.OrderedDict:
    """Each blob's loss weight by name (0 for blobs that are not losses)."""
    return collections.OrderedDict(zip(self._blob_names, self._blob_loss_weights))


@property
def _net_layer_dict(self) -> collections.OrderedDict:
    """Every layer by name, input to output."""
    return collections.OrderedDict(zip(self._layer_names, self.layers))


@property
def _net_params(self) -> collections.OrderedDict:
    """The learnable blobs of each layer that has some, by layer name."""
    return collections.OrderedDict((name, layer.blobs)
                                   for name, layer in zip(self._layer_names, self.layers)
                                   if len(layer.blobs) > 0)


@property
def _net_inputs(self) -> list:
    """Names of the net's input blobs (the tops of its Input layers)."""
    names = list(self.blobs.keys())
    return [names[i] for i in self._inputs]


@property
def _net_outputs(self) -> list:
    """Names of the blobs no layer consumes (losses, accuracies, probabilities)."""
    names = list(self.blobs.keys())
    return [names[i] for i in self._outputs]


def _names_by_layer(ids_of):
    @property
    def names(self) -> collections.OrderedDict:
        blob_names = list(self.blobs)
        return collections.OrderedDict(
            (self._layer_names[i], [blob_names[j] for j in ids_of(self, i)])
            for i in range(len(self.layers)))
    return names


def _layer_index(net, name: str) -> int:
    try:
        return list(net._layer_names).index(name)
    except ValueError:
        raise KeyError(f"no layer named {name!r} in net {net.name!r}") from None


def _set_batch(net, arrays: dict, attribute: str, wanted: list, what: str) -> None:
    """Writes named arrays into blobs' data or diff after pycaffe's checks."""
    if set(arrays) != set(wanted):
        raise Exception(f"{what} blob arguments do not match net {what.lower()}s: got "
                        f"{sorted(arrays)}, the net has {sorted(wanted)}")
    for name, value in arrays.items():
        blob = net.blobs[name]
        value = np.asarray(value)
        if value.shape[0] != blob.shape[0]:
            raise Exception(f"{what} is not batch sized: {name!r} has {value.shape[0]} rows, "
                            f"the blob takes {blob.shape[0]}")
        target = getattr(blob, attribute)
        try:
            target[...] = value  # numpy's broadcasting, as pycaffe's assignment
        except ValueError as e:
            raise ValueError(f"{name!r}: an array of shape {value.shape} does not fit the blob's "
                             f"shape {tuple(blob.shape)} ({e})") from None


def _run(net, first: int, last: int, wanted: set, inputs: dict, attribute: str,
         expected: list, what: str, run) -> dict:
    """The part forward and backward share: check the names asked for, write
    the keyword arrays into `attribute` (data or diff), run, return the views."""
    for name in wanted:
        if name not in net.blobs:
            raise KeyError(f"no blob named {name!r} in net {net.name!r}")
    if inputs:
        _set_batch(net, inputs, attribute, expected, what)
    run(first, last)
    return {name: getattr(net.blobs[name], attribute) for name in wanted}


def _net_forward(self, blobs=None, start=None, end=None, **kwargs) -> dict:
    """Runs the net forward (from layer `start` to layer `end`, inclusive, by
    name); keyword arguments set input blobs first. Returns {name: data view}
    for the outputs (or `end`'s tops) plus the `blobs` asked for."""
    blobs = list(blobs or [])
    first = _layer_index(self, start) if start is not None else 0
    if end is not None:
        last, wanted = _layer_index(self, end), set(self.top_names[end] + blobs)
    else:
        last, wanted = len(self.layers) - 1, set(self.outputs + blobs)
    return _run(self, first, last, wanted, kwargs, "data", self.inputs, "Input", self._forward)


def _net_backward(self, diffs=None, start=None, end=None, **kwargs) -> dict:
    """Runs the net backward (from layer `start` down to `end`, by name);
    keyword arguments set the outputs' diffs first. Returns {name: diff view}
    for the inputs (or `end`'s bottoms) plus the `diffs` asked for."""
    diffs = list(diffs or [])
    first = _layer_index(self, start) if start is not None else len(self.layers) - 1
    if end is not None:
        last, wanted = _layer_index(self, end), set(self.bottom_names[end] + diffs)
    else:
        last, wanted = 0, set(self.inputs + diffs)
    return _run(self, first, last, wanted, kwargs, "diff", self.outputs, "Output",
                self._backward)


def _net_batch(self, arrays: dict) -> Iterator[dict]:
    """Cuts equally long arrays into the net's batch size; the last batch is
    padded with zeros."""
    count = len(next(iter(arrays.values())))
    batch = next(iter(self.blobs.values())).shape[0]
    for begin in range(0, count - count % batch, batch):
        yield {name: value[begin:begin + batch] for name, value in arrays.items()}
    rest = count % batch
    if rest:
        padded = {}
        for name, value in arrays.items():
            value = np.asarray(value)
            padding = np.zeros((batch - rest,) + value.shape[1:], dtype=np.float32)
            padded[name] = np.concatenate([value[-rest:], padding])
        yield padded


def _strip_padding(results: dict, count: int) -> dict:
    return {name: np.asarray(rows)[:count] for name, rows in results.items()}


def _net_forward_all(self, blobs=None, **kwargs) -> dict:
    """forward over arrays of any length, batch by batch; {name: all rows}."""
    collected = {name: [] for name in set(self.outputs + list(blobs or []))}
    for batch in self._batch(kwargs):
        for name, rows in self.forward(blobs=blobs, **batch).items():
            collected[name].extend(rows.copy())
    count = len(next(iter(kwargs.values()))) if kwargs else None
    if count is None:
        return {name: np.asarray(rows) for name, rows in collected.items()}
    return _strip_padding(collected, count)


def _net_forward_backward_all(self, blobs=None, diffs=None, **kwargs) -> tuple[dict, dict]:
    """forward and backward over arrays of any length, batch by batch;
    ({name: all data rows}, {name: all diff rows})."""
    outs = {name: [] for name in set(self.outputs + list(blobs or []))}
    grads = {name: [] for name in set(self.inputs + list(diffs or []))}
    forward_batches = self._batch({k: kwargs[k] for k in self.inputs if k in kwargs})
    backward_inputs = {k: kwargs[k] for k in self.outputs if k in kwargs}
    backward_batches = self._batch(backward_inputs) if backward_inputs else iter(())
    for fwd, bwd in itertools.zip_longest(forward_batches, backward_batches, fillvalue={}):
        for name, rows in self.forward(blobs=blobs, **fwd).items():
            outs[name].extend(rows.copy())
        for name, rows in self.backward(diffs=diffs, **bwd).items():
            grads[name].extend(rows.copy())
    count = len(next(iter(kwargs.values()))) if kwargs else None
    if count is None:
        return ({k: np.asarray(v) for k, v in outs.items()},
                {k: np.asarray(v) for k, v in grads.items()})
    return _strip_padding(outs, count), _strip_padding(grads, count)


def _net_set_input_arrays(self, data, labels) -> None:
    """Hands arrays to the net's first layer, a MemoryData layer: data of
    shape (N, C, H, W) and labels of N (or (N, 1, 1, 1)) float32 values, N a
    multiple of its batch size. The arrays are read, not copied, batch by batch."""
    labels = np.asarray(labels)
    if labels.ndim == 1:
        labels = np.ascontiguousarray(labels[:, np.newaxis, np.newaxis, np.newaxis])
    self._set_input_arrays(data, labels)


def _h5py():
    try:
        import h5py
    except ImportError as e:
        raise ImportError("save_hdf5 / load_hdf5 need h5py (pip install h5py)") from e
    return h5py


def _net_save_hdf5(self, filename: str) -> None:
    """Writes the learned blobs as Caffe's Net::ToHDF5 lays them out:
    /data/<layer>/<blob index>."""
    h5py = _h5py()
    with h5py.File(filename, "w") as f:
        data = f.create_group("data")
        for name, blobs in self.params.items():
            group = data.create_group(name)
            for i, blob in enumerate(blobs):
                group.create_dataset(str(i), data=blob.data)


def _net_load_hdf5(self, filename: str) -> None:
    """Copies learned blobs from an HDF5 file of Caffe's layout by layer name;
    layers absent from the file keep their values."""
    h5py = _h5py()
    with h5py.File(filename, "r") as f:
        data = f["data"]
        for name, blobs in self.params.items():
            if name not in data:
                continue
            group = data[name]
            if len(group) != len(blobs):
                raise ValueError(f"{filename}: layer {name!r} has {len(group)} blobs, the net's "
                                 f"has {len(blobs)}")
            for i, blob in enumerate(blobs):
                values = np.asarray(group[str(i)], dtype=np.float32)
                if values.size != blob.count:
                    raise ValueError(f"{filename}: {name}/{i} has shape {values.shape}, the "
                                     f"net's blob {tuple(blob.shape)}")
                blob.data[...] = values.reshape(blob.data.shape)


Net.blobs = _net_blobs
Net.blob_loss_weights = _net_blob_loss_weights
Net.layer_dict = _net_layer_dict
Net.params = _net_params
Net.inputs = _net_inputs
Net.outputs = _net_outputs
Net.top_names = _names_by_layer(Net._top_ids)
Net.bottom_names = _names_by_layer(Net._bottom_ids)
Net.forward = _net_forward
Net.backward = _net_backward
Net.forward_all = _net_forward_all
Net.forward_backward_all = _net_forward_backward_all
Net.set_input_arrays = _net_set_input_arrays
Net._batch = _net_batch
Net.save_hdf5 = _net_save_hdf5
Net.load_hdf5 = _net_load_hdf5


class Layer:
    """The base class of Python layers (python_param { module layer }).

    The engine sets `param_str`, `phase` (TRAIN 0, TEST 1), `rank` and
    `num_workers` (this worker and how many train; 0 and 1 in one process) and
    `blobs` (learnable blobs; `self.blobs.add_blob(*shape)` adds one) before
    `setup(bottom, top)`. A subclass defines `reshape(bottom, top)`,
    `forward(bottom, top)` and, when it takes part in backward,
    `backward(top, propagate_down, bottom)`; bottom and top are lists of Blobs.
    """

    type = "Python"

    def __init__(self, param: Any = None) -> None:
        self.layer_param = param

    def setup(self, bottom: list, top: list) -> None:
        """Checks the parameters and the bottoms once; nothing by default."""

    def reshape(self, bottom: list, top: list) -> None:
        raise NotImplementedError(f"Python layer class {type(self).__name__} must define "
                                  "reshape(bottom, top)")

    def forward(self, bottom: list, top: list) -> None:
        raise NotImplementedError(f"Python layer class {type(self).__name__} must define "
                                  "forward(bottom, top)")

    def backward(self, top: list, propagate_down: list, bottom: list) -> None:
        raise NotImplementedError(f"Python layer class {type(self).__name__} must define "
                                  "backward(top, propagate_down, bottom)")


class Timer:
    """pycaffe's Timer: start(), stop(), and ms, the milliseconds between them
    (wall clock)."""

    def __init__(self) -> None:
        self._start: float | None = None
        self._elapsed = 0.0

    def start(self) -> None:
        self._start = time.perf_counter()

    def stop(self) -> None:
        if self._start is not None:
            self._elapsed = time.perf_counter() - self._start
            self._start = None

    @property
    def ms(self) -> float:
        if self._start is not None:
            self.stop()
        return self._elapsed * 1000.0
