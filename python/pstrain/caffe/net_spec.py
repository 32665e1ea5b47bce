"""pycaffe's net specification: nets written as Python calls, turned into a NetParameter.

    n = NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 3, 32, 32]))
    n.conv = L.Convolution(n.data, num_output=8, kernel_size=3)
    n.relu = L.ReLU(n.conv, in_place=True)
    print(n.to_proto())

`layers.<Type>(*bottoms, **settings)` (L below) makes a layer of that type and returns
its top (a Top), a tuple of tops when `ntop` > 1, or the layer itself (a Function)
when `ntop` is 0. `in_place=True` makes the layer write into its first bottom.
Each other keyword is a field: a name ending in `param` is a field of
LayerParameter; any other name is looked for in the layer type's own message
(`kernel_size` of a Convolution goes into `convolution_param`), then in
LayerParameter. Dicts fill messages, lists fill repeated fields (a lone value becomes
a one-element list), anything else is assigned as it is.

Blob and layer names: NetSpec.to_proto names each assigned top, and each layer after
its first top, by the attribute it was assigned to; the module-level `to_proto` and
Top.to_proto name everything `<Type><k>`, k counting layers of that type from 1.
`params.<Type>.<VALUE>` (P) is an enum value of `<Type>Parameter`, e.g.
P.Pooling.MAX.
"""
from __future__ import annotations

import collections
from typing import Any, Callable

from google.protobuf import message as _message

from .proto import caffe_pb2

__all__ = ["Function", "NetSpec", "Top", "layers", "params", "to_proto"]

_PARAM_SUFFIX = "_param"
_TYPE_SUFFIX = "Parameter"


def param_name_dict() -> dict[str, str]:
    """Layer type name -> prefix of its LayerParameter field, read from the schema:
    each `<prefix>_param` field of type `<Type>Parameter` gives 'Type' -> 'prefix'
    (e.g. 'Convolution' -> 'convolution', 'InnerProduct' -> 'inner_product')."""
    names: dict[str, str] = {}
    for field in caffe_pb2.LayerParameter.DESCRIPTOR.fields:
        if field.name.endswith(_PARAM_SUFFIX) and field.message_type is not None:
            type_name = field.message_type.name
            if type_name.endswith(_TYPE_SUFFIX):
                type_name = type_name[:-len(_TYPE_SUFFIX)]
            names[type_name] = field.name[:-len(_PARAM_SUFFIX)]
    return names


_param_names = param_name_dict()


def _is_repeated(proto: Any, name: str) -> bool:
    return hasattr(getattr(proto, name), "extend")


def assign_proto(proto: Any, name: str, val: Any) -> None:
    """Sets field `name` of message `proto` from a Python value: a dict fills the
    sub-message field by field, a list (or tuple) extends a repeated field (a list of
    dicts adds one message per dict), a lone value given to a repeated field is
    appended, a message is copied in, anything else is assigned. Raises
    AttributeError for a field the message does not have."""
    target = getattr(proto, name)
    if _is_repeated(proto, name) and not isinstance(val, (list, tuple)):
        val = [val]
    if isinstance(val, (list, tuple)):
        if val and isinstance(val[0], dict):
            for item in val:
                _fill(target.add(), item)
        else:
            target.extend(val)
    elif isinstance(val, dict):
        _fill(target, val)
    elif isinstance(val, _message.Message):
        target.CopyFrom(val)
    else:
        setattr(proto, name, val)


def _fill(proto: Any, fields: dict[str, Any]) -> None:
    for key, value in fields.items():
        assign_proto(proto, key, value)


class Top:
    """One output blob: the `n`-th top of the layer `fn`."""

    def __init__(self, fn: Function, n: int) -> None:
        self.fn = fn
        self.n = n

    def to_proto(self) -> Any:
        """A NetParameter with every layer this top depends on, auto-named."""
        return to_proto(self)

    def _to_proto(self, layers: dict, names: dict, autonames: collections.Counter) -> None:
        self.fn._to_proto(layers, names, autonames)


class Function:
    """One layer: its type, its bottoms (Tops) and its settings (`params`, the keyword
    arguments without `ntop` and `in_place`). Raises TypeError for a bottom that is
    not a Top."""

    def __init__(self, type_name: str, inputs: tuple, params: dict[str, Any]) -> None:
        for index, bottom in enumerate(inputs):
            if not isinstance(bottom, Top):
                raise TypeError(f"{type_name} input {index} is not a Top "
                                f"(type is {type(bottom)})")
        self.type_name = type_name
        self.inputs = inputs
        self.params = params
        self.ntop = self.params.pop("ntop", 1)
        self.in_place = self.params.pop("in_place", False)
        self.tops = tuple(Top(self, n) for n in range(self.ntop))

    def _autoname(self, autonames: collections.Counter) -> str:
        autonames[self.type_name] += 1
        return f"{self.type_name}{autonames[self.type_name]}"

    def _get_top_name(self, top: Top, names: dict, autonames: collections.Counter) -> str:
        if top not in names:
            names[top] = top.fn._autoname(autonames)
        return names[top]

    def _get_name(self, names: dict, autonames: collections.Counter) -> str:
        """The layer's name: its own when assigned, else its first top's, else
        `<Type><k>`."""
        if self not in names:
            names[self] = (self._get_top_name(self.tops[0], names, autonames)
                           if self.ntop > 0 else self._autoname(autonames))
        return names[self]

    def _to_proto(self, layers: dict, names: dict, autonames: collections.Counter) -> None:
        """Adds this layer to `layers` (Function -> LayerParameter, in dependency
        order), after the layers it depends on."""
        if self in layers:
            return
        bottoms = []
        for bottom in self.inputs:
            bottom._to_proto(layers, names, autonames)
            bottoms.append(layers[bottom.fn].top[bottom.n])
        layer = caffe_pb2.LayerParameter(type=self.type_name, bottom=bottoms)
        if self.in_place:
            layer.top.extend(layer.bottom)
        else:
            layer.top.extend(self._get_top_name(t, names, autonames) for t in self.tops)
        layer.name = self._get_name(names, autonames)
        for key, value in self.params.items():
            self._assign(layer, key, value)
        layers[self] = layer

    def _assign(self, layer: Any, key: str, value: Any) -> None:
        """One setting: a `*param` key names a LayerParameter field; any other key a
        field of the type's own message when it has one, else of LayerParameter."""
        if not key.endswith("param"):
            try:
                own = getattr(layer, _param_names[self.type_name] + _PARAM_SUFFIX)
                assign_proto(own, key, value)
                return
            except (AttributeError, KeyError):
                pass
        assign_proto(layer, key, value)


class NetSpec:
    """Named tops, assigned as attributes (`n.conv1 = ...`) or items (`n['conv1']`).
    to_proto makes the NetParameter that computes all of them: each layer once, after
    the layers it reads from, tops and layers named as assigned."""

    def __init__(self) -> None:
        super().__setattr__("tops", collections.OrderedDict())

    def __setattr__(self, name: str, value: Any) -> None:
        self.tops[name] = value

    def __getattr__(self, name: str) -> Any:
        # Read through __dict__: copy and pickle look attributes up on an instance
        # whose `tops` is not set yet.
        tops = self.__dict__.get("tops")
        if tops is None or name not in tops:
            raise _MissingTop(name)
        return tops[name]

    def __setitem__(self, key: str, value: Any) -> None:
        self.__setattr__(key, value)

    def __getitem__(self, item: str) -> Any:
        return self.__getattr__(item)

    def to_proto(self) -> Any:
        names = {top: name for name, top in self.tops.items()}
        autonames: collections.Counter = collections.Counter()
        layers: dict = collections.OrderedDict()
        for top in self.tops.values():
            top._to_proto(layers, names, autonames)
        return caffe_pb2.NetParameter(layer=list(layers.values()))


class _MissingTop(AttributeError, KeyError):
    """A name no top was assigned to: an AttributeError (so hasattr and copy work) that
    is also the KeyError pycaffe raises."""

    def __str__(self) -> str:
        return repr(self.args[0]) if self.args else ""


def to_proto(*tops: Top) -> Any:
    """A NetParameter with every layer the given tops depend on, auto-named."""
    layers: dict = collections.OrderedDict()
    names: dict = {}
    autonames: collections.Counter = collections.Counter()
    for top in tops:
        top.fn._to_proto(layers, names, autonames)
    return caffe_pb2.NetParameter(layer=list(layers.values()))


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


class Layers:
    """`layers.<Type>(*bottoms, **settings)` specifies a layer of that Caffe type."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if _is_dunder(name):
            raise AttributeError(name)

        def layer_fn(*args: Top, **kwargs: Any) -> Any:
            fn = Function(name, args, kwargs)
            if fn.ntop == 0:
                return fn
            return fn.tops[0] if fn.ntop == 1 else fn.tops
        layer_fn.__name__ = name
        return layer_fn


class _EnumsOf:
    """The constants of `<Type>Parameter` (params.Pooling.MAX)."""

    def __init__(self, type_name: str) -> None:
        self._message = type_name + _TYPE_SUFFIX

    def __getattr__(self, value_name: str) -> Any:
        if _is_dunder(value_name):
            raise AttributeError(value_name)
        return getattr(getattr(caffe_pb2, self._message), value_name)


class Parameters:
    """`params.<Type>.<NAME>` is a constant of caffe_pb2.<Type>Parameter."""

    def __getattr__(self, name: str) -> _EnumsOf:
        if _is_dunder(name):
            raise AttributeError(name)
        return _EnumsOf(name)


layers = Layers()
params = Parameters()
