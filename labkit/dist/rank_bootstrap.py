"""The first code of every rank that ``python -m labkit.dist.run`` starts, before the user's script.

It sends the rank's stdout and stderr (the file descriptors, so output of native code too) to
files of its own in the run's folder, which the launcher reads and prints labelled with the rank;
sets torchrun's per-rank variables (``RANK``, ``LOCAL_RANK``); runs the script (or ``-m`` module)
as ``__main__``, as ``python`` would; and writes the rank's pid and then its exit code to the
run's folder, so the launcher knows which rank failed first.
A failed rank leaves at once (``os._exit``): it must not wait in MPI's finalize for ranks that
wait for it in a collective. It runs as a plain file and imports nothing of labkit itself (the
script does, if it wants to).

    python rank_bootstrap.py RUN_FOLDER (SCRIPT | -m MODULE) [ARGS...]
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_launch_env():
    import importlib.util
    spec = importlib.util.spec_from_file_location("_labkit_launch_env",
                                                  os.path.join(HERE, "launch_env.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record(folder, rank, what, text):
    """Write ``folder/<rank>.<what>`` whole (a reader never sees half of it)."""
    path = os.path.join(folder, f"{rank}.{what}")
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def _redirect(folder, rank):
    for fd, stream in ((1, "stdout"), (2, "stderr")):
        out = os.open(os.path.join(folder, f"{rank}.{stream}"),
                      os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(out, fd)
        os.close(out)


def _exit_code(code):
    """The exit status Python gives ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _print_exception(exc):
    """The traceback as ``python script.py`` prints it: without this file's and runpy's frames."""
    import traceback
    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_globals.get("__name__") == "runpy" or
                              tb.tb_frame.f_code.co_filename == __file__):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _run(target):
    import runpy
    if target[0] == "-m":
        sys.argv = [target[1]] + target[2:]
        sys.path[0] = os.getcwd()
        runpy.run_module(target[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(target)
        sys.path[0] = os.path.dirname(os.path.abspath(target[0]))
        runpy.run_path(target[0], run_name="__main__")


def _torchrun_env(env):
    """torchrun's per-rank variables (the launcher set those that all ranks share)."""
    local = env.local_rank if env.local_rank is not None else env.rank    # one machine
    os.environ.update(RANK=str(env.rank), LOCAL_RANK=str(local), ROLE_RANK=str(env.rank))


def main(argv):
    folder, target = argv[1], argv[2:]
    env = _load_launch_env().from_environ()
    rank = env.rank if env is not None else 0
    if env is not None:
        _torchrun_env(env)
    _redirect(folder, rank)
    record(folder, rank, "pid", str(os.getpid()))
    try:
        _run(target)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt as exc:
        _print_exception(exc)
        code = 130
    except BaseException as exc:
        _print_exception(exc)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    record(folder, rank, "exit", f"{code} {time.time()!r}")
    if code != 0:
        os._exit(code)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
