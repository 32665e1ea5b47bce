"""pstrain.caffe.coord_map: coordinate maps through conv/pool/deconv/crop layers, by
hand, Caffe's own cases, and the crop offsets of the FCN semantic-segmentation nets."""
from __future__ import annotations

import numpy as np
import pytest

from pstrain.caffe import coord_map as cm
from pstrain.caffe.coord_map import coord_map_from_to, crop
from pstrain.caffe.net_spec import NetSpec, layers as L, params as P


def coord_net_spec(ks=3, stride=1, pad=0, pool=2, dstride=2, dpad=0) -> NetSpec:
    """Input -> Convolution -> max Pooling -> Deconvolution (kernel twice its stride),
    with a second, unconnected input `aux`."""
    n = NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 1, 100, 100]))
    n.aux = L.Input(shape=dict(dim=[2, 1, 20, 20]))
    n.conv = L.Convolution(n.data, num_output=10, kernel_size=ks, stride=stride, pad=pad)
    n.pool = L.Pooling(n.conv, pool=P.Pooling.MAX, kernel_size=pool, stride=pool, pad=0)
    deconv_ks = [2 * s for s in dstride] if isinstance(dstride, list) else 2 * dstride
    n.deconv = L.Deconvolution(n.pool, num_output=10, kernel_size=deconv_ks, stride=dstride,
                               pad=dpad)
    return n


def as_floats(m: tuple) -> tuple:
    axis, a, b = m
    return axis, np.asarray(a, dtype=float).tolist(), np.asarray(b, dtype=float).tolist()


# --- single layers and composition, by hand ---------------------------------------------

def test_layer_maps_by_hand() -> None:
    n = coord_net_spec(ks=3, stride=1, pad=0, pool=2)
    # Convolution: a = 1/stride, b = (pad - (ks - 1) / 2) / stride.
    assert as_floats(cm.coord_map(n.conv.fn)) == (1, [1.0], [-1.0])
    assert as_floats(cm.coord_map(n.pool.fn)) == (1, [0.5], [-0.25])
    # Deconvolution: a = stride, b = (ks - 1) / 2 - pad.
    assert as_floats(cm.coord_map(n.deconv.fn)) == (1, [2.0], [1.5])
    assert cm.coord_map(L.ReLU(n.conv).fn) == (None, 1, 0)
    assert as_floats(cm.coord_map(L.Crop(n.conv, n.data, axis=2, offset=[3, 4]).fn)) == \
        (1, 1.0, [-3.0, -4.0])


def test_dilated_convolution_and_settings_in_convolution_param() -> None:
    data = L.Input()
    dilated = L.Convolution(data, kernel_size=3, dilation=2, pad=1, stride=2)
    # Effective kernel (3 - 1) * 2 + 1 = 5: b = (1 - 2) / 2.
    assert as_floats(cm.coord_map(dilated.fn)) == (1, [0.5], [-0.5])
    nested = L.Convolution(data, convolution_param=dict(kernel_size=5, stride=4, pad=3, axis=2))
    assert cm.conv_params(nested.fn)[0] == 2
    assert as_floats(cm.coord_map(nested.fn)) == (2, [0.25], [0.25])


def test_conv_then_pool_maps_to_the_pooled_window_centre() -> None:
    n = coord_net_spec(ks=3, stride=1, pad=0, pool=2)
    # conv pixel j is centred on data pixel j + 1; pool pixel i covers conv 2i, 2i + 1.
    assert as_floats(coord_map_from_to(n.conv, n.data)) == (1, [1.0], [1.0])
    assert as_floats(coord_map_from_to(n.pool, n.data)) == (1, [2.0], [1.5])
    assert as_floats(coord_map_from_to(n.data, n.pool)) == (1, [0.5], [-0.75])
    assert as_floats(coord_map_from_to(n.pool, n.conv)) == (1, [2.0], [0.5])


def test_compose_and_inverse() -> None:
    assert cm.compose((None, 2, 1), (3, 4, 5)) == (3, 8, 11)
    assert cm.compose((1, 2, 1), (None, 4, 5)) == (1, 8, 11)
    with pytest.raises(cm.AxisMismatchException):
        cm.compose((1, 1, 0), (2, 1, 0))
    assert cm.inverse((1, 4.0, 2.0)) == (1, 0.25, -0.5)


def test_undefined_and_legacy_layers() -> None:
    data = L.Input()
    with pytest.raises(cm.UndefinedMapException):
        cm.coord_map(L.InnerProduct(data, num_output=2).fn)
    legacy = L.Convolution(data, kernel_size=3, pad_h=1)
    with pytest.raises(AssertionError, match="legacy _h/_w"):
        cm.coord_map(legacy.fn)


def test_crop_params_defaults() -> None:
    data = L.Input()
    axis, offset = cm.crop_params(L.Crop(data, data).fn)
    assert axis == 2 and offset.tolist() == [0]
    axis, offset = cm.crop_params(L.Crop(data, data, crop_param=dict(axis=1, offset=[2, 3])).fn)
    assert axis == 1 and offset.tolist() == [2, 3]


# --- Caffe's cases ----------------------------------------------------------------------

def test_conv_pool_deconv() -> None:
    n = coord_net_spec()
    assert as_floats(coord_map_from_to(n.deconv, n.data)) == (1, [1.0], [0.0])
    n = coord_net_spec(pool=4, dstride=4)
    assert as_floats(coord_map_from_to(n.deconv, n.data)) == (1, [1.0], [-1.0])


def test_pass_through_layers_keep_the_map() -> None:
    n = coord_net_spec()
    expected = as_floats(coord_map_from_to(n.deconv, n.data))
    n.relu = L.ReLU(n.deconv)
    n.conv1x1 = L.Convolution(n.relu, num_output=10, kernel_size=1, stride=1, pad=0)
    for top in (n.relu, n.conv1x1):
        assert as_floats(coord_map_from_to(top, n.data)) == expected
    for layer_type in cm.PASS_THROUGH_LAYERS:
        assert cm.coord_map(getattr(L, layer_type)(n.data).fn) == (None, 1, 0)


@pytest.mark.parametrize("pad", [0, 1, 7])
def test_padding(pad: int) -> None:
    n = coord_net_spec()
    _, a, b = coord_map_from_to(n.deconv, n.data)
    n = coord_net_spec(pad=pad)
    _, a_pad, b_pad = coord_map_from_to(n.deconv, n.data)
    assert a_pad == a and b_pad == b - pad     # conv padding adds an offset
    n = coord_net_spec(dpad=pad)
    _, a_pad, b_pad = coord_map_from_to(n.deconv, n.data)
    assert a_pad == a and b_pad == b + pad     # deconv padding takes it away
    n = coord_net_spec(pad=pad, dpad=pad)
    _, a_pad, b_pad = coord_map_from_to(n.deconv, n.data)
    assert a_pad == a and b_pad == b


def test_layer_with_several_bottoms_maps_each_alike() -> None:
    n = coord_net_spec()
    n.conv_data, n.conv_aux = L.Convolution(n.data, n.aux, ntop=2, num_output=10,
                                            kernel_size=5, stride=2, pad=0)
    first = as_floats(coord_map_from_to(n.conv_data, n.data))
    assert first == as_floats(coord_map_from_to(n.conv_aux, n.aux))
    assert first == (1, [2.0], [2.0])   # conv pixel j is centred on input pixel 2j + 2


def test_rectangular_map_is_its_square_parts() -> None:
    n3x3 = coord_net_spec(ks=3, stride=1, pad=0)
    n5x5 = coord_net_spec(ks=5, stride=2, pad=10)
    n3x5 = coord_net_spec(ks=[3, 5], stride=[1, 2], pad=[0, 10])
    ax_33, a_33, b_33 = coord_map_from_to(n3x3.deconv, n3x3.data)
    ax_55, a_55, b_55 = coord_map_from_to(n5x5.deconv, n5x5.data)
    ax_35, a_35, b_35 = coord_map_from_to(n3x5.deconv, n3x5.data)
    assert ax_33 == ax_55 == ax_35 == 1
    assert (a_35[0], b_35[0]) == (a_33[0], b_33[0])
    assert (a_35[1], b_35[1]) == (a_55[0], b_55[0])


def test_nd_convolution() -> None:
    n = NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 3, 100, 100, 100]))
    n.conv = L.Convolution(n.data, num_output=10, kernel_size=[3, 3, 3], stride=[1, 1, 1],
                           pad=[0, 1, 2])
    n.pool = L.Pooling(n.conv, pool=P.Pooling.MAX, kernel_size=2, stride=2, pad=0)
    n.deconv = L.Deconvolution(n.pool, num_output=10, kernel_size=4, stride=2, pad=0)
    ax, a, b = coord_map_from_to(n.deconv, n.data)
    assert ax == 1 and len(a) == len(b) == 3
    assert np.all(a == 1)
    assert b.tolist() == [0.0, -1.0, -2.0]


@pytest.mark.parametrize("offset", [0, 4, 10])
def test_crop_of_crop(offset: int) -> None:
    n = coord_net_spec()
    ax, a, b = coord_map_from_to(n.deconv, n.data)
    n.crop = L.Crop(n.deconv, n.data, axis=2, offset=offset)
    ax_crop, a_crop, b_crop = coord_map_from_to(n.crop, n.data)
    assert ax_crop == ax and a_crop == a and b_crop == b + offset


def test_unconnected_tops_raise() -> None:
    n = coord_net_spec()
    n.ip = L.InnerProduct(n.deconv, num_output=10)
    with pytest.raises(RuntimeError, match="Could not compute map between tops"):
        coord_map_from_to(n.ip, n.data)
    with pytest.raises(RuntimeError):
        coord_map_from_to(n.deconv, n.aux)


# --- crop() -----------------------------------------------------------------------------

@pytest.mark.parametrize("pad", [0, 3, 5])
def test_crop_layer_offsets(pad: int) -> None:
    n = coord_net_spec(pad=pad)
    cropped = crop(n.deconv, n.data)
    assert cropped.fn.type_name == "Crop" and cropped.fn.inputs == (n.deconv, n.data)
    assert cropped.fn.params == {"crop_param": {"axis": 2, "offset": [pad]}}


def test_crop_layer_in_the_net() -> None:
    n = NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 1, 32, 32]))
    n.conv = L.Convolution(n.data, num_output=2, kernel_size=3, pad=4)
    n.up = L.Deconvolution(n.conv, convolution_param=dict(num_output=2, kernel_size=1))
    n.cropped = crop(n.up, n.data)
    layer = n.to_proto().layer[-1]
    assert (layer.name, layer.type, list(layer.bottom), list(layer.top)) == \
        ("cropped", "Crop", ["up", "data"], ["cropped"])
    assert (layer.crop_param.axis, list(layer.crop_param.offset)) == (2, [3])


def test_crop_refuses_a_scale_mismatch() -> None:
    n = coord_net_spec(pool=3, dstride=2)
    with pytest.raises(AssertionError, match="scale mismatch"):
        crop(n.deconv, n.data)


def test_crop_refuses_a_negative_offset() -> None:
    n = coord_net_spec(dpad=10)
    with pytest.raises(AssertionError, match="cannot crop negative offset"):
        crop(n.deconv, n.data)


def test_crop_refuses_a_fractional_offset() -> None:
    n = coord_net_spec(ks=2)
    with pytest.raises(AssertionError, match="noninteger offset"):
        crop(n.deconv, n.data)


# --- the FCN nets (VGG-16 trunk, conv1_1 padded by 100) ---------------------------------

def conv_relu(bottom, nout: int, ks: int = 3, pad: int = 1):
    conv = L.Convolution(bottom, kernel_size=ks, num_output=nout, pad=pad)
    return conv, L.ReLU(conv, in_place=True)


def max_pool(bottom):
    return L.Pooling(bottom, pool=P.Pooling.MAX, kernel_size=2, stride=2)


def upsample(bottom, ks: int, stride: int):
    return L.Deconvolution(bottom, convolution_param=dict(num_output=21, kernel_size=ks,
                                                          stride=stride, bias_term=False))


def fcn_trunk() -> NetSpec:
    n = NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 3, 500, 500]))
    bottom, pad = n.data, 100
    for stage, (convs, width) in enumerate([(2, 64), (2, 128), (3, 256), (3, 512), (3, 512)],
                                           start=1):
        for i in range(1, convs + 1):
            n[f"conv{stage}_{i}"], n[f"relu{stage}_{i}"] = conv_relu(bottom, width, pad=pad)
            bottom, pad = n[f"relu{stage}_{i}"], 1
        n[f"pool{stage}"] = bottom = max_pool(bottom)
    n.fc6, n.relu6 = conv_relu(n.pool5, 4096, ks=7, pad=0)
    n.drop6 = L.Dropout(n.relu6, dropout_ratio=0.5, in_place=True)
    n.fc7, n.relu7 = conv_relu(n.drop6, 4096, ks=1, pad=0)
    n.drop7 = L.Dropout(n.relu7, dropout_ratio=0.5, in_place=True)
    n.score_fr = L.Convolution(n.drop7, num_output=21, kernel_size=1, pad=0)
    return n


def offset_of(top) -> list[int]:
    return top.fn.params["crop_param"]["offset"]


def test_fcn32s_crop() -> None:
    n = fcn_trunk()
    n.upscore = upsample(n.score_fr, 64, 32)
    n.score = crop(n.upscore, n.data)
    assert offset_of(n.score) == [19]


def test_fcn16s_and_fcn8s_crops() -> None:
    n = fcn_trunk()
    n.upscore2 = upsample(n.score_fr, 4, 2)
    n.score_pool4 = L.Convolution(n.pool4, num_output=21, kernel_size=1, pad=0)
    n.score_pool4c = crop(n.score_pool4, n.upscore2)
    n.fuse_pool4 = L.Eltwise(n.upscore2, n.score_pool4c, operation=P.Eltwise.SUM)
    n.upscore16 = upsample(n.fuse_pool4, 32, 16)
    n.score16 = crop(n.upscore16, n.data)
    assert offset_of(n.score_pool4c) == [5] and offset_of(n.score16) == [27]
    n.upscore_pool4 = upsample(n.fuse_pool4, 4, 2)
    n.score_pool3 = L.Convolution(n.pool3, num_output=21, kernel_size=1, pad=0)
    n.score_pool3c = crop(n.score_pool3, n.upscore_pool4)
    n.fuse_pool3 = L.Eltwise(n.upscore_pool4, n.score_pool3c, operation=P.Eltwise.SUM)
    n.upscore8 = upsample(n.fuse_pool3, 16, 8)
    n.score8 = crop(n.upscore8, n.data)
    assert offset_of(n.score_pool3c) == [9] and offset_of(n.score8) == [31]
