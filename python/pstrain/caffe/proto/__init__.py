"""Caffe's protobuf schema for pycaffe scripts: `from pstrain.caffe.proto import caffe_pb2`."""
from . import caffe_pb2

__all__ = ["caffe_pb2"]
