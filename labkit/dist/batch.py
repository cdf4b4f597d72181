"""Workers as one batch job: ``launcher="slurm"`` (or ``"pbs"``) on ``Cluster`` and ``launch``.

ipyparallel's Slurm and PBS engine launchers submit the job (``sbatch`` / ``qsub``) and cancel it
(``scancel`` / ``qdel``) when the cluster closes; labkit gives them the job's script: it asks
for ``n`` tasks and runs ``mpiexec`` in the allocation, so the workers form one MPI world across
the nodes the batch system chose (Open MPI reads the allocation and starts its daemons there
itself). The job carries the submitting environment (``--export=ALL`` / ``-V``). Should the
process holding the cluster die instead of closing it (a killed kernel), labkit's reaper
cancels a Slurm job by its name (``cancel_command``). The controller runs here and
listens on every interface, its messages encrypted (CurveZMQ); the nodes must reach this
machine by its name.

PBS is written in PBS Pro's form (``select``); it has not been run against a PBS server.

>>> print(script("slurm", ["mpiexec", "--bind-to", "none"], ["--partition=debug"]), end="")
#!/bin/sh
#SBATCH --job-name=labkit-{cluster_id}
#SBATCH --ntasks={n}
#SBATCH --export=ALL
#SBATCH --output={output_file}
#SBATCH --partition=debug
exec mpiexec --bind-to none {program_and_args}
"""
import shlex
import shutil
import subprocess

# launcher name -> ipyparallel's engine launcher class
LAUNCHERS = {"slurm": "SlurmEngineSetLauncher", "pbs": "PBSEngineSetLauncher"}

_HEADERS = {
    "slurm": ("#SBATCH", ["--job-name=labkit-{cluster_id}", "--ntasks={n}", "--export=ALL",
                          "--output={output_file}"]),
    "pbs": ("#PBS", ["-N labkit", "-l select={n}:ncpus=1:mpiprocs=1", "-V", "-j oe",
                     "-o {output_file}"]),
}


def script(kind, mpiexec_argv, options=()):
    """The job script for ipyparallel's batch launcher ``kind`` ("slurm" or "pbs"): the
    options, then ``mpiexec_argv`` running the engines (``{...}`` fields are filled in by
    ipyparallel: ``n``, ``cluster_id``, ``output_file``, ``program_and_args``)."""
    prefix, lines = _HEADERS[kind]
    lines = lines + [_escape(o) for o in options]
    command = " ".join(_escape(shlex.quote(w)) for w in mpiexec_argv)
    return "\n".join(["#!/bin/sh"] + [f"{prefix} {line}" for line in lines] +
                     [f"exec {command} {{program_and_args}}"]) + "\n"


def cancel_command(kind, cluster_id):
    """The command that cancels the job of cluster ``cluster_id`` by its name, for the reaper
    to run if the process holding the cluster dies (the job's workers may run on nodes that
    the reaper's marks cannot reach); None where there is no such job ("mpi") or no name to
    find it by (PBS's job names are not unique).

    >>> cancel_command("slurm", "123-ab")
    ['scancel', '--name=labkit-123-ab']
    """
    if kind == "slurm":
        return ["scancel", f"--name=labkit-{cluster_id}"]
    return None


# Slurm's states of a job that will not start its workers any more
_ENDED = {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
          "OUT_OF_MEMORY", "PREEMPTED", "REVOKED", "TIMEOUT"}


def job_state(kind, cluster_id):
    """What the batch system says of cluster ``cluster_id``'s job, as ``(state, reason)``
    (Slurm's words, e.g. ``("PENDING", "Resources")``); ``("GONE", "")`` once it no longer
    lists the job, and None where it cannot be asked (PBS, or ``squeue`` not answering)."""
    squeue = shutil.which("squeue")
    if kind != "slurm" or squeue is None:
        return None
    try:
        out = subprocess.run([squeue, "-h", "--states=all", f"--name=labkit-{cluster_id}",
                              "-o", "%T %r"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    line = out.stdout.strip().splitlines()
    if not line:
        return ("GONE", "")
    state, _, reason = line[0].partition(" ")
    return (state, "" if reason in ("None", "(null)") else reason)


def job_ended(state):
    """True when ``state`` (from ``job_state``) is a job that will start no workers now."""
    return state is not None and (state[0] == "GONE" or state[0] in _ENDED)


def describe(kind, state):
    """``state`` in words for an error message: "the Slurm job is PENDING (reason:
    Resources)"."""
    if state is None:
        return ""
    name = {"slurm": "Slurm", "pbs": "PBS"}.get(kind, kind)
    if state[0] == "GONE":
        return f"the {name} job is no longer listed by squeue"
    return f"the {name} job is {state[0]}" + (f" (reason: {state[1]})" if state[1] else "")


def _escape(text):
    """Braces kept literal through ipyparallel's template formatting."""
    return text.replace("{", "{{").replace("}", "}}")
