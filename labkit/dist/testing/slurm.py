"""A real Slurm cluster of one node on this machine, to try ``launcher="slurm"`` without a
cluster: ``munged`` with a key made for it, ``slurmctld`` and ``slurmd`` on free loopback
ports, their configuration, state and logs in a temporary folder, and ``SLURM_CONF`` pointing
at it (so ``sbatch``, ``squeue``, ``scancel`` and ipyparallel's Slurm launcher use it) until
``close()``, which stops every daemon and puts ``SLURM_CONF`` back.

Needs root (``slurmd`` starts the jobs) and Debian's ``slurmctld``, ``slurmd``,
``slurm-client`` and ``munge``; ``start_slurm`` raises ``Unavailable`` with the reason.

>>> from labkit.dist.testing import start_slurm
>>> slurm = start_slurm()                                          # doctest: +SKIP
>>> lk.dist.launch(fn, n=2, launcher="slurm")                      # doctest: +SKIP
>>> slurm.close()                                                  # doctest: +SKIP
"""
import os
import shutil
import socket
import subprocess
import tempfile
import time

from .hosts import Unavailable, _free_port, find, stop

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "scancel", "sinfo", "squeue", "scontrol")


class LocalSlurm:
    """The daemons of one started Slurm cluster: ``folder`` (its configuration, state and
    logs), ``conf`` (the ``slurm.conf``), ``node`` (its one node's name); ``jobs()`` lists
    the jobs Slurm knows of, ``close()`` stops it all."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="labkit-slurm-")
        self.conf = os.path.join(self.folder, "slurm.conf")
        self.node = socket.gethostname()
        self.daemons = []
        self._old_conf = os.environ.get("SLURM_CONF")

    def start(self):
        missing = [p for p in PROGRAMS if find(p) is None]
        if missing:
            raise Unavailable(f"no Slurm here ({', '.join(missing)} missing): apt-get install "
                              f"slurmctld slurmd slurm-client munge")
        if os.geteuid() != 0:
            raise Unavailable("slurmd must run as root to start jobs")
        folder = self.folder
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(folder, sub))
        with open(os.path.join(folder, "munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(os.path.join(folder, "munge.key"), 0o600)
        with open(self.conf, "w") as f:
            f.write(self._config())
        os.environ["SLURM_CONF"] = self.conf
        for argv in ([find("munged"), "-F", "--force", f"--key-file={folder}/munge.key",
                      f"--socket={folder}/munge.socket", f"--seed-file={folder}/munge.seed",
                      f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log"],
                     [find("slurmctld"), "-D", "-f", self.conf, "-L", f"{folder}/slurmctld.log"],
                     [find("slurmd"), "-D", "-f", self.conf, "-L", f"{folder}/slurmd.log"]):
            self.daemons.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.DEVNULL,
                                                 start_new_session=True))
            if argv[0].endswith("munged"):
                self._wait_for(lambda: os.path.exists(f"{folder}/munge.socket"))
        # "idle" alone: "idle*" is a node that has not answered the controller yet
        self._wait_for(lambda: subprocess.run(
            [find("sinfo"), "-h", "-o", "%t"], capture_output=True, text=True,
            timeout=10).stdout.split() == ["idle"])
        self._probe()
        return self

    def _probe(self, timeout=60):
        """Run one empty job to its end: the scheduler starts jobs and the node runs them
        (a node can list as idle a moment before its first job can start)."""
        out = subprocess.run([find("sbatch"), "--parsable", "--wrap=true", "--job-name=probe",
                              "--output=/dev/null"], capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise Unavailable(f"Slurm refused a job here: {out.stderr.strip()}\n{self._logs()}")
        job = out.stdout.strip().split(";")[0]
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = subprocess.run([find("scontrol"), "show", "job", job], capture_output=True,
                                   text=True, timeout=10).stdout
            if "JobState=COMPLETED" in shown:
                return
            if any(f"JobState={s}" in shown for s in ("FAILED", "CANCELLED", "NODE_FAIL")):
                break
            time.sleep(0.2)
        raise Unavailable(f"Slurm's first job did not complete within {timeout} s:\n"
                          f"{shown.strip()}\n{self._logs()}")

    def _config(self):
        folder, node = self.folder, self.node
        return (f"ClusterName=labkit\nSlurmctldHost={node}(127.0.0.1)\n"
                f"SlurmctldPort={_free_port()}\nSlurmdPort={_free_port()}\nSlurmUser=root\n"
                f"AuthType=auth/munge\nCredType=cred/munge\n"
                f"AuthInfo=socket={folder}/munge.socket\n"
                f"StateSaveLocation={folder}/state\nSlurmdSpoolDir={folder}/spool\n"
                f"SlurmctldPidFile={folder}/slurmctld.pid\nSlurmdPidFile={folder}/slurmd.pid\n"
                f"ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
                f"SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nMpiDefault=none\n"
                f"ReturnToService=2\nSchedulerType=sched/backfill\n"
                f"NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} "
                f"State=UNKNOWN\n"
                f"PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP "
                f"OverSubscribe=FORCE:4\n")

    def _wait_for(self, ready, timeout=20):
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline or any(d.poll() is not None for d in self.daemons):
                raise Unavailable(f"Slurm did not start here:\n{self._logs()}")
            time.sleep(0.2)

    def _logs(self):
        logs = ""
        for name in ("munged.log", "slurmctld.log", "slurmd.log"):
            try:
                with open(os.path.join(self.folder, name)) as f:
                    logs += f"{name}: {f.read()[-400:]}\n"
            except OSError:
                pass
        return logs

    def jobs(self):
        """The jobs Slurm knows of, as (job id, state) pairs."""
        out = subprocess.run([find("squeue"), "-h", "-o", "%i %T"], capture_output=True,
                             text=True, timeout=10).stdout
        return [tuple(line.split()) for line in out.splitlines() if line.strip()]

    def close(self):
        stop(list(reversed(self.daemons)))
        self.daemons = []
        if self._old_conf is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = self._old_conf
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def start_slurm():
    """A started one-node Slurm cluster (``LocalSlurm``); the caller must ``close()`` it."""
    slurm = LocalSlurm()
    try:
        return slurm.start()
    except BaseException:
        slurm.close()
        raise
