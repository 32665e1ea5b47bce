"""After the README's setup (scripts/setup.sh links them beside ps-train), ps-net
and ps-data are on PATH with ps-train, and they are this checkout's programs."""
import shutil
import subprocess


def test_ps_net_and_ps_data_are_on_path_beside_ps_train():
    for program in ("ps-train", "ps-net", "ps-data"):
        assert shutil.which(program), f"{program} is not on PATH"
    for program in ("ps-net", "ps-data"):
        out = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(program + " "), out.stdout
