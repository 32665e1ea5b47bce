"""The opt-in alias (python -m pstrain.caffe_alias): `import caffe` loads
pstrain.caffe, and a real Caffe on the path is never shadowed."""
import subprocess
import sys

RUN_WITH_SITE = ("import site, sys; site.addsitedir(sys.argv[1]); "
                 "import caffe; from caffe.proto import caffe_pb2; "
                 "from caffe import layers as L, params as P; import pstrain.caffe; "
                 "print(caffe is pstrain.caffe, caffe_pb2.TEST, L.Convolution.__name__ if "
                 "hasattr(L.Convolution, '__name__') else 'ok')")


def run(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)


def test_install_makes_import_caffe_load_pstrain_caffe(tmp_path):
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    without = run("-c", RUN_WITH_SITE, str(site_dir), cwd=tmp_path)
    assert without.returncode != 0 and "No module named 'caffe'" in without.stderr
    done = run("-m", "pstrain.caffe_alias", "install", "--site", str(site_dir), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (site_dir / "pstrain-caffe-alias.pth").is_file()
    used = run("-c", RUN_WITH_SITE, str(site_dir), cwd=tmp_path)
    assert used.returncode == 0, used.stderr
    assert used.stdout.split()[:2] == ["True", "1"]
    gone = run("-m", "pstrain.caffe_alias", "uninstall", "--site", str(site_dir), cwd=tmp_path)
    assert gone.returncode == 0 and not (site_dir / "pstrain-caffe-alias.pth").exists()


def test_a_real_caffe_on_the_path_is_never_shadowed(tmp_path):
    real = tmp_path / "real" / "caffe"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("WHO = 'the real caffe'\n")
    env = {"PYTHONPATH": str(tmp_path / "real"), "PATH": "/usr/bin:/bin"}
    import os
    env = {**os.environ, **env}
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    refused = run("-m", "pstrain.caffe_alias", "install", "--site", str(site_dir), env=env,
                  cwd=tmp_path)
    assert refused.returncode == 1
    assert "refusing" in refused.stderr and str(real) in refused.stderr
    assert not (site_dir / "pstrain-caffe-alias.pth").exists()
    # Installed anyway (say, before that Caffe arrived): the real one still wins.
    run("-m", "pstrain.caffe_alias", "install", "--site", str(site_dir), cwd=tmp_path)
    assert (site_dir / "pstrain-caffe-alias.pth").is_file()
    who = run("-c", "import site, sys; site.addsitedir(sys.argv[1]); import caffe; print(caffe.WHO)",
              str(site_dir), env=env, cwd=tmp_path)
    assert who.stdout.strip() == "the real caffe", who.stderr


SUBMODULES = """
import site, sys
site.addsitedir(sys.argv[1])
from caffe import layers as L, params as P
from caffe.coord_map import crop
import caffe.net_spec, caffe.io, pstrain.caffe.net_spec
same = [sys.modules[f"caffe.{m}"] is sys.modules[f"pstrain.caffe.{m}"]
        for m in ("net_spec", "coord_map", "io")]
n = caffe.NetSpec()
n.data = L.Input(shape=dict(dim=[1, 1, 12, 12]))
n.conv = L.Convolution(n.data, num_output=1, kernel_size=3, pad=1)
n.pool = L.Pooling(n.conv, pool=P.Pooling.MAX, kernel_size=2, stride=2)
n.deconv = L.Deconvolution(n.pool, convolution_param=dict(num_output=1, kernel_size=4, stride=2,
                                                          pad=1))
n.crop = crop(n.deconv, n.data)
last = n.to_proto().layer[-1]
print(same, last.type, list(last.crop_param.offset))
"""


def test_submodules_under_the_alias_are_pstrain_caffe_s_own(tmp_path):
    """`from caffe.coord_map import crop` and `caffe.layers` share one net_spec:
    the alias's submodules are the same module objects as pstrain.caffe's (a
    second copy, loaded through the package's path, made crop refuse the layers
    built with caffe.layers: Caffe's own test_coord_map failed so)."""
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    run("-m", "pstrain.caffe_alias", "install", "--site", str(site_dir), cwd=tmp_path)
    out = run("-c", SUBMODULES, str(site_dir), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[True,", "True,", "True]", "Crop", "[0]"], out.stdout
