"""A real Slurm cluster of one node on this machine, for ``launcher="slurm"``: ``munged`` with
a key made for the test, ``slurmctld`` and ``slurmd`` on free loopback ports, their
configuration, state and logs in a temporary folder, and ``SLURM_CONF`` pointing at it while
the tests run. Skipped, with the reason, without root or Debian's ``slurmctld``, ``slurmd``,
``slurm-client`` and ``munge``; every daemon is stopped afterwards.
"""
import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "scancel", "sinfo", "squeue")


def _find(name):
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}")
                                       if os.access(p, os.X_OK)), None)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(folder):
    node = socket.gethostname()
    return (f"ClusterName=labkit\nSlurmctldHost={node}(127.0.0.1)\n"
            f"SlurmctldPort={_free_port()}\nSlurmdPort={_free_port()}\nSlurmUser=root\n"
            f"AuthType=auth/munge\nCredType=cred/munge\n"
            f"AuthInfo=socket={folder}/munge.socket\n"
            f"StateSaveLocation={folder}/state\nSlurmdSpoolDir={folder}/spool\n"
            f"SlurmctldPidFile={folder}/slurmctld.pid\nSlurmdPidFile={folder}/slurmd.pid\n"
            f"ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
            f"SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nMpiDefault=none\n"
            f"ReturnToService=2\nSchedulerType=sched/backfill\n"
            f"NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN\n"
            f"PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP "
            f"OverSubscribe=FORCE:4\n")


@pytest.fixture(scope="session")
def slurm():
    """A started Slurm cluster; yields its folder (``SLURM_CONF`` is set meanwhile)."""
    missing = [p for p in PROGRAMS if _find(p) is None]
    if missing:
        pytest.skip(f"no Slurm here ({', '.join(missing)} missing): "
                    f"apt-get install slurmctld slurmd slurm-client munge")
    if os.geteuid() != 0:
        pytest.skip("the test's slurmd must run as root to start jobs")
    folder = tempfile.mkdtemp(prefix="labkit-test-slurm-")
    daemons = []
    old = os.environ.get("SLURM_CONF")
    try:
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(folder, sub))
        with open(os.path.join(folder, "munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(os.path.join(folder, "munge.key"), 0o600)
        conf = os.path.join(folder, "slurm.conf")
        with open(conf, "w") as f:
            f.write(_config(folder))
        os.environ["SLURM_CONF"] = conf
        for argv in ([_find("munged"), "-F", "--force", f"--key-file={folder}/munge.key",
                      f"--socket={folder}/munge.socket", f"--seed-file={folder}/munge.seed",
                      f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log"],
                     [_find("slurmctld"), "-D", "-f", conf, "-L", f"{folder}/slurmctld.log"],
                     [_find("slurmd"), "-D", "-f", conf, "-L", f"{folder}/slurmd.log"]):
            daemons.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, start_new_session=True))
            if argv[0].endswith("munged"):
                _wait_for(lambda: os.path.exists(f"{folder}/munge.socket"), folder, daemons)
        _wait_for(lambda: "idle" in subprocess.run([_find("sinfo"), "-h", "-o", "%t"],
                                                   capture_output=True, text=True,
                                                   timeout=10).stdout, folder, daemons)
        yield folder
    finally:
        for daemon in reversed(daemons):
            daemon.terminate()
        for daemon in daemons:
            try:
                daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        shutil.rmtree(folder, ignore_errors=True)


def _wait_for(ready, folder, daemons, timeout=20):
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline or any(d.poll() is not None for d in daemons):
            logs = ""
            for name in ("munged.log", "slurmctld.log", "slurmd.log"):
                try:
                    with open(os.path.join(folder, name)) as f:
                        logs += f"{name}: {f.read()[-400:]}\n"
                except OSError:
                    pass
            pytest.skip(f"the test's Slurm did not start:\n{logs}")
        time.sleep(0.2)
