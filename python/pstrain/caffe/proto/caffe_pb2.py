"""Caffe's message classes, laid out as protoc's generated `caffe_pb2` module lays them out.

Every message of caffe.proto is a class in this module (NetParameter,
LayerParameter, SolverParameter, BlobProto, Datum, ...); each top-level enum is an
EnumTypeWrapper (`Phase.Name(0) == 'TRAIN'`) and its values are module constants
(TRAIN, TEST); enums declared inside a message are reached through its class
(`PoolingParameter.MAX`, `SolverParameter.SGD`, `PoolingParameter.PoolMethod`).

The classes come from a private descriptor pool, so this module never clashes with
another caffe.proto registered in protobuf's default pool (a real Caffe's caffe_pb2
imported in the same process, say). The schema itself comes from
`_file_descriptor_bytes()`, the one place that knows where to find it.
"""
from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.internal import enum_type_wrapper


def _file_descriptor_bytes() -> bytes:
    """caffe.proto as a serialized FileDescriptorProto.

    The compiled extension carries the schema the C++ engine was built with; before it
    is built (or in a checkout without it), protoc compiles this checkout's
    proto/caffe.proto instead. Raises ImportError when neither is available."""
    try:
        return bytes(_core_module().caffe_proto_descriptor())
    except (ImportError, AttributeError) as e:
        engine_error = e
    from pstrain import caffe_schema

    schema = caffe_schema.messages()
    if schema is None:
        raise ImportError("pstrain.caffe.proto.caffe_pb2 needs caffe.proto's schema: build "
                          "PSTrain's Python extension (pstrain._core), or install protoc "
                          "(Debian: protobuf-compiler) in a checkout that has proto/caffe.proto "
                          f"(the extension: {engine_error})")
    return schema.pool.FindMessageTypeByName("caffe.NetParameter").file.serialized_pb


def _core_module() -> Any:
    """pstrain._core, found where pstrain._native looks for it (the build tree, the
    installed package); raises ImportError when it is not built."""
    try:
        from pstrain._native import core
    except ImportError:
        import pstrain._core
        return pstrain._core
    return core()


def _load_file(serialized: bytes) -> Any:
    """The FileDescriptor of `serialized`, added to a pool of its own."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(serialized)
    return pool.FindFileContainingSymbol("caffe.NetParameter")


def _message_class(descriptor: Any, qualname: str) -> type:
    """The class of one message type, named as a class of this module (so that pickle
    finds it), with its nested message types named below it."""
    cls = message_factory.GetMessageClass(descriptor)
    cls.__module__ = __name__
    cls.__qualname__ = qualname
    for nested in descriptor.nested_types:
        _message_class(nested, f"{qualname}.{nested.name}")
    return cls


def _module_attributes(file: Any) -> dict[str, Any]:
    """What protoc's generated module exposes: message classes, top-level enum wrappers
    and the values of those enums."""
    attributes: dict[str, Any] = {}
    for name, descriptor in file.message_types_by_name.items():
        attributes[name] = _message_class(descriptor, name)
    for name, enum in file.enum_types_by_name.items():
        attributes[name] = enum_type_wrapper.EnumTypeWrapper(enum)
        attributes.update((value.name, value.number) for value in enum.values)
    return attributes


DESCRIPTOR = _load_file(_file_descriptor_bytes())
globals().update(_module_attributes(DESCRIPTOR))
