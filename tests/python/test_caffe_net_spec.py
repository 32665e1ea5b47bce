"""pstrain.caffe.net_spec: nets written in Python become the NetParameter Caffe's
net_spec makes for them (names, in-place layers, tops, field placement)."""
from __future__ import annotations

import copy
import pickle

import pytest
from google.protobuf import text_format

from pstrain.caffe import net_spec
from pstrain.caffe.net_spec import NetSpec, layers as L, params as P
from pstrain.caffe.proto import caffe_pb2


def lenet(batch_size: int) -> caffe_pb2.NetParameter:
    n = NetSpec()
    n.data, n.label = L.DummyData(shape=[dict(dim=[batch_size, 1, 28, 28]),
                                         dict(dim=[batch_size, 1, 1, 1])],
                                  transform_param=dict(scale=1. / 255), ntop=2)
    n.conv1 = L.Convolution(n.data, kernel_size=5, num_output=20,
                            weight_filler=dict(type="xavier"))
    n.pool1 = L.Pooling(n.conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.conv2 = L.Convolution(n.pool1, kernel_size=5, num_output=50,
                            weight_filler=dict(type="xavier"))
    n.pool2 = L.Pooling(n.conv2, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.ip1 = L.InnerProduct(n.pool2, num_output=500, weight_filler=dict(type="xavier"))
    n.relu1 = L.ReLU(n.ip1, in_place=True)
    n.ip2 = L.InnerProduct(n.relu1, num_output=10, weight_filler=dict(type="xavier"))
    n.loss = L.SoftmaxWithLoss(n.ip2, n.label)
    return n.to_proto()


def anon_lenet(batch_size: int) -> caffe_pb2.NetParameter:
    data, label = L.DummyData(shape=[dict(dim=[batch_size, 1, 28, 28]),
                                     dict(dim=[batch_size, 1, 1, 1])],
                              transform_param=dict(scale=1. / 255), ntop=2)
    conv1 = L.Convolution(data, kernel_size=5, num_output=20, weight_filler=dict(type="xavier"))
    pool1 = L.Pooling(conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    conv2 = L.Convolution(pool1, kernel_size=5, num_output=50, weight_filler=dict(type="xavier"))
    pool2 = L.Pooling(conv2, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    ip1 = L.InnerProduct(pool2, num_output=500, weight_filler=dict(type="xavier"))
    relu1 = L.ReLU(ip1, in_place=True)
    ip2 = L.InnerProduct(relu1, num_output=10, weight_filler=dict(type="xavier"))
    return L.SoftmaxWithLoss(ip2, label).to_proto()


def silent_net() -> caffe_pb2.NetParameter:
    n = NetSpec()
    n.data, n.data2 = L.DummyData(shape=dict(dim=3), ntop=2)
    n.silence_data = L.Silence(n.data, ntop=0)
    n.silence_data2 = L.Silence(n.data2, ntop=0)
    return n.to_proto()


def summary(net: caffe_pb2.NetParameter) -> list[tuple]:
    return [(l.name, l.type, list(l.bottom), list(l.top)) for l in net.layer]


LENET_TEXT = """
layer { name: "data" type: "DummyData" top: "data" top: "label"
        transform_param { scale: 0.00392156862745098 }
        dummy_data_param { shape { dim: 64 dim: 1 dim: 28 dim: 28 }
                           shape { dim: 64 dim: 1 dim: 1 dim: 1 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 20 kernel_size: 5 weight_filler { type: "xavier" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
        convolution_param { num_output: 50 kernel_size: 5 weight_filler { type: "xavier" } } }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool2" top: "ip1"
        inner_product_param { num_output: 500 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
"""


def test_lenet_is_the_expected_net() -> None:
    net = lenet(64)
    expected = text_format.Parse(LENET_TEXT, caffe_pb2.NetParameter())
    assert net == expected
    # The text to_proto gives parses back to the same net.
    assert text_format.Parse(str(net), caffe_pb2.NetParameter()) == net


def test_lenet_relu_is_in_place() -> None:
    net = lenet(50)
    assert len(net.layer) == 9
    assert net.layer[6].bottom == net.layer[6].top == ["ip1"]
    assert net.layer[6].name == "relu1"


def test_anonymous_lenet_names() -> None:
    net = anon_lenet(50)
    assert summary(net) == [
        ("DummyData1", "DummyData", [], ["DummyData1", "DummyData2"]),
        ("Convolution1", "Convolution", ["DummyData1"], ["Convolution1"]),
        ("Pooling1", "Pooling", ["Convolution1"], ["Pooling1"]),
        ("Convolution2", "Convolution", ["Pooling1"], ["Convolution2"]),
        ("Pooling2", "Pooling", ["Convolution2"], ["Pooling2"]),
        ("InnerProduct1", "InnerProduct", ["Pooling2"], ["InnerProduct1"]),
        ("ReLU1", "ReLU", ["InnerProduct1"], ["InnerProduct1"]),
        ("InnerProduct2", "InnerProduct", ["InnerProduct1"], ["InnerProduct2"]),
        ("SoftmaxWithLoss1", "SoftmaxWithLoss", ["InnerProduct2", "DummyData2"],
         ["SoftmaxWithLoss1"]),
    ]
    # Apart from the names, the same net as the named one.
    named = lenet(50)
    for anonymous, layer in zip(net.layer, named.layer):
        for field in ("name", "bottom", "top"):
            anonymous.ClearField(field)
            layer.ClearField(field)
    assert net == named


def test_layers_without_tops() -> None:
    net = silent_net()
    assert summary(net) == [("data", "DummyData", [], ["data", "data2"]),
                            ("silence_data", "Silence", ["data"], []),
                            ("silence_data2", "Silence", ["data2"], [])]
    # A lone dict for a repeated message field is one element; a lone int too.
    assert [list(s.dim) for s in net.layer[0].dummy_data_param.shape] == [[3]]


def test_layer_without_tops_takes_its_assigned_name() -> None:
    n = NetSpec()
    n.data = L.Input(shape=dict(dim=[1]))
    n.sink = L.Silence(n.data, ntop=0)
    n.other_sink = L.Silence(L.ReLU(n.data), ntop=0)
    assert summary(n.to_proto()) == [("data", "Input", [], ["data"]),
                                     ("sink", "Silence", ["data"], []),
                                     ("ReLU1", "ReLU", ["data"], ["ReLU1"]),
                                     ("other_sink", "Silence", ["ReLU1"], [])]


def test_input_that_is_not_a_top_is_a_type_error() -> None:
    data = L.DummyData(ntop=2)   # a tuple of two tops
    assert isinstance(data, tuple) and len(data) == 2
    with pytest.raises(TypeError) as error:
        L.Silence(data, ntop=0)
    assert str(error.value) == "Silence input 0 is not a Top (type is <class 'tuple'>)"
    L.Silence(*data, ntop=0)


def test_layer_function_results() -> None:
    one = L.ReLU(L.Input())
    assert isinstance(one, net_spec.Top) and one.n == 0
    several = L.Slice(one, ntop=3)
    assert [t.n for t in several] == [0, 1, 2] and several[0].fn is several[2].fn
    none = L.Silence(one, ntop=0)
    assert isinstance(none, net_spec.Function) and none.tops == ()
    fn = one.fn
    assert (fn.type_name, fn.ntop, fn.in_place, fn.params) == ("ReLU", 1, False, {})
    assert L.ReLU(one, in_place=True, negative_slope=0.5).fn.params == {"negative_slope": 0.5}


def test_fields_go_to_the_type_message_else_to_the_layer() -> None:
    n = NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 3, 8, 8]))
    n.conv = L.Convolution(n.data, num_output=4, kernel_size=3, pad=[1], stride=2,
                           bias_term=False, loss_weight=0.5,
                           param=[dict(lr_mult=1), dict(lr_mult=2, decay_mult=0)],
                           include=dict(phase=caffe_pb2.TEST), propagate_down=[True],
                           name="renamed")
    layer = n.to_proto().layer[1]
    expected = text_format.Parse("""
        name: "renamed" type: "Convolution" bottom: "data" top: "conv"
        loss_weight: 0.5
        param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
        include { phase: TEST }
        propagate_down: true
        convolution_param { num_output: 4 bias_term: false pad: 1 kernel_size: 3 stride: 2 }
    """, caffe_pb2.LayerParameter())
    assert layer == expected


def test_param_keys_name_layer_fields_directly() -> None:
    n = NetSpec()
    n.data = L.Input(input_param=dict(shape=[dict(dim=[1, 2]), dict(dim=[3])]))
    n.out = L.Python(n.data, python_param=dict(module="mod", layer="Layer",
                                               param_str="{'k': 1}"))
    n.scaled = L.Power(n.out, power=2.0, scale=0.5, shift=-1.0)
    proto = n.to_proto()
    assert [list(s.dim) for s in proto.layer[0].input_param.shape] == [[1, 2], [3]]
    python = proto.layer[1].python_param
    assert (python.module, python.layer, python.param_str) == ("mod", "Layer", "{'k': 1}")
    power = proto.layer[2].power_param
    assert (power.power, power.scale, power.shift) == (2.0, 0.5, -1.0)


def test_type_without_its_own_message_takes_layer_fields_only() -> None:
    # Deconvolution has no DeconvolutionParameter: its settings are convolution_param's.
    good = L.Deconvolution(L.Input(), convolution_param=dict(num_output=2, kernel_size=4))
    assert good.to_proto().layer[1].convolution_param.kernel_size == [4]
    bad = L.Deconvolution(L.Input(), kernel_size=4)
    with pytest.raises(AttributeError):
        bad.to_proto()


def test_unknown_field_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        L.Convolution(L.Input(), no_such_field=1).to_proto()


def test_message_values_and_tuples_are_accepted() -> None:
    filler = caffe_pb2.FillerParameter(type="gaussian", std=0.01)
    top = L.InnerProduct(L.Input(), num_output=3, weight_filler=filler,
                         param=(dict(lr_mult=1), dict(lr_mult=2)))
    layer = top.to_proto().layer[1]
    assert layer.inner_product_param.weight_filler == filler
    assert [p.lr_mult for p in layer.param] == [1, 2]


def test_in_place_chain_and_multiple_tops() -> None:
    n = NetSpec()
    n.data, n.label = L.DummyData(shape=[dict(dim=[2, 4]), dict(dim=[2])], ntop=2)
    n.ip = L.InnerProduct(n.data, num_output=4)
    n.bn = L.BatchNorm(n.ip, in_place=True)
    n.scale = L.Scale(n.bn, bias_term=True, in_place=True)
    n.relu = L.ReLU(n.scale, in_place=True)
    n.a, n.b = L.Slice(n.relu, slice_point=[1], ntop=2)
    n.sum = L.Eltwise(n.a, n.b, operation=P.Eltwise.SUM, coeff=[1, -1])
    n.loss = L.EuclideanLoss(n.sum, n.label)
    assert summary(n.to_proto()) == [
        ("data", "DummyData", [], ["data", "label"]),
        ("ip", "InnerProduct", ["data"], ["ip"]),
        ("bn", "BatchNorm", ["ip"], ["ip"]),
        ("scale", "Scale", ["ip"], ["ip"]),
        ("relu", "ReLU", ["ip"], ["ip"]),
        ("a", "Slice", ["ip"], ["a", "b"]),
        ("sum", "Eltwise", ["a", "b"], ["sum"]),
        ("loss", "EuclideanLoss", ["sum", "label"], ["loss"]),
    ]
    eltwise = n.to_proto().layer[6].eltwise_param
    assert eltwise.operation == caffe_pb2.EltwiseParameter.SUM and list(eltwise.coeff) == [1, -1]


def test_layers_come_in_dependency_order_once() -> None:
    n = NetSpec()
    n.late = L.ReLU(L.Input(name="in"))   # its input, never assigned, comes first
    n.data = n.late.fn.inputs[0]
    n.alias = n.late                        # a top assigned twice takes the last name
    proto = n.to_proto()
    assert summary(proto) == [("in", "Input", [], ["data"]),
                              ("alias", "ReLU", ["data"], ["alias"])]


def test_module_to_proto_shares_layers_between_tops() -> None:
    data = L.Input()
    first = L.ReLU(data)
    second = L.Sigmoid(data)
    net = net_spec.to_proto(first, second)
    assert summary(net) == [("Input1", "Input", [], ["Input1"]),
                            ("ReLU1", "ReLU", ["Input1"], ["ReLU1"]),
                            ("Sigmoid1", "Sigmoid", ["Input1"], ["Sigmoid1"])]
    assert first.to_proto() == net_spec.to_proto(first)


def test_params_are_enum_values() -> None:
    assert P.Pooling.MAX == caffe_pb2.PoolingParameter.MAX == 0
    assert P.Pooling.AVE == 1 and P.Pooling.STOCHASTIC == 2
    assert P.Eltwise.PROD == 0 and P.Eltwise.SUM == 1 and P.Eltwise.MAX == 2
    assert P.Convolution.CAFFE == caffe_pb2.ConvolutionParameter.CAFFE
    with pytest.raises(AttributeError):
        P.Pooling.NOT_A_METHOD
    with pytest.raises(AttributeError):
        P.NotAType.X


def test_param_name_dict() -> None:
    names = net_spec.param_name_dict()
    assert names["Convolution"] == "convolution"
    assert names["InnerProduct"] == "inner_product"
    assert names["Transformation"] == "transform"
    assert names["HDF5Output"] == "hdf5_output"
    assert names["Python"] == "python"
    assert "Deconvolution" not in names
    assert len(names) == sum(1 for f in caffe_pb2.LayerParameter.DESCRIPTOR.fields
                             if f.name.endswith("_param"))


def test_netspec_item_access_and_missing_names() -> None:
    n = NetSpec()
    n["data"] = L.Input()
    assert n["data"] is n.data and list(n.tops) == ["data"]
    assert not hasattr(n, "missing")
    with pytest.raises(KeyError):
        n["missing"]
    with pytest.raises(AttributeError):
        n.missing
    with pytest.raises(KeyError):
        n.missing


def test_netspec_copies_and_pickles() -> None:
    n = NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 2]))
    n.relu = L.ReLU(n.data)
    for clone in (copy.deepcopy(n), pickle.loads(pickle.dumps(n))):
        assert list(clone.tops) == ["data", "relu"]
        assert clone.to_proto() == n.to_proto()
