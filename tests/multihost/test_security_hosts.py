"""docs/security.md across hosts (the hosts of netns_hosts.py): each host's copy
of the run folder receives every public key but only the secret keys of the
processes it runs, owner-only; the orchestrator's secret key never leaves the
launching machine."""
from __future__ import annotations

import json
import stat

from test_hostfile import hostfile_job, no_programs_left, run_to_end


def test_each_host_gets_only_the_secret_keys_of_its_own_processes(tmp_path, hosts,
                                                                  fashion_mnist):
    # Server 0 on host 1, worker 0 on host 2, worker 1 on host 3 (no spare slots).
    job = hostfile_job(tmp_path, hosts, "keys")
    summary, out = run_to_end(hosts, job)
    assert summary["status"] == "ok", (summary["message"], out)
    run = tmp_path / "runs" / "keys"
    publics = sorted(p.name for p in (run / "keys").glob("*.pub"))
    assert publics == ["control.pub", "server-0.pub", "worker-0.pub", "worker-1.pub"]
    own = {1: "server-0.key", 2: "worker-0.key", 3: "worker-1.key"}
    for i, secret in own.items():
        folder = tmp_path / f"on-host-{hosts.address(i)}" / "keys" / "keys"
        assert folder.is_dir(), sorted(str(p) for p in tmp_path.rglob("*.key"))
        names = sorted(p.name for p in folder.iterdir())
        assert names == sorted(publics + [secret]), (i, names)
        key = folder / secret
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, oct(key.stat().st_mode)
        assert key.read_text() == (run / "keys" / secret).read_text()
    # The orchestrator's secret key is nowhere but in the run folder here.
    found = sorted(str(p) for p in tmp_path.rglob("control.key"))
    assert found == [str(run / "keys" / "control.key")], found
    assert json.loads((run / "summary.json").read_text())["iterations"] > 0
    assert not no_programs_left(hosts)
