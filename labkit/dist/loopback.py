"""Keeping a cluster on this machine off the network: nothing it starts listens beyond loopback.

A local cluster's own sockets are on loopback already (ipyparallel's controller on 127.0.0.1,
PMIx between the ranks and their launcher on loopback). Open MPI adds two kinds of listeners on
every interface, which no MCA parameter binds to one address (``btl_tcp_if_include`` and
``oob_tcp_if_include`` only choose which addresses are *advertised*):

- each rank's TCP BTL, for MPI messages between hosts: a local cluster runs without it
  (``btl=^tcp``; ranks on one machine talk through shared memory, which they use anyway);
- the launcher's (``prterun``) out-of-band channel to the daemons of other hosts, which a
  local cluster never has: a tiny library preloaded into the launcher alone turns its binds to
  "any address" into binds to loopback (``127.0.0.1`` / ``::1``). It is compiled here with the
  C compiler (``cc``) on first use; without one, the cluster starts with a warning that says so.

Between hosts, ``network=`` chooses the network Open MPI uses (``btl_tcp_if_include`` /
``oob_tcp_if_include``), and labkit's own messages between ranks are JSON in MPI buffers
(``labkit.dist.messages``), never unpickled.
"""
import hashlib
import os
import shutil
import subprocess
import warnings

# Rewrites bind(INADDR_ANY / in6addr_any) to loopback. The launcher (prterun) takes it out of
# LD_PRELOAD at once, so the ranks it starts do not inherit it; the ``mpiexec`` wrapper, which
# only execs the launcher, passes it on.
SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

extern char *program_invocation_short_name;
static int (*real_bind)(int, const struct sockaddr *, socklen_t);

__attribute__((constructor)) static void labkit_loopback_init(void) {
    const char *me = program_invocation_short_name;
    const char *preload = getenv("LD_PRELOAD");
    if (!preload || strcmp(me, "mpiexec") == 0 || strcmp(me, "mpirun") == 0) return;
    char *kept = calloc(strlen(preload) + 1, 1), *copy = strdup(preload), *save = NULL;
    if (!kept || !copy) return;
    for (char *item = strtok_r(copy, " :", &save); item; item = strtok_r(NULL, " :", &save)) {
        if (strstr(item, "labkit-loopback")) continue;
        if (*kept) strcat(kept, ":");
        strcat(kept, item);
    }
    if (*kept) setenv("LD_PRELOAD", kept, 1); else unsetenv("LD_PRELOAD");
    free(kept); free(copy);
}

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    if (!real_bind) real_bind = (int (*)(int, const struct sockaddr *, socklen_t))
        dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in a;
        memcpy(&a, addr, sizeof a);
        if (a.sin_addr.s_addr == htonl(INADDR_ANY)) {
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
        }
    } else if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 a;
        memcpy(&a, addr, sizeof a);
        if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {
            a.sin6_addr = in6addr_loopback;
            return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
        }
    }
    return real_bind(fd, addr, len);
}
"""
_NAME = f"labkit-loopback-{hashlib.sha256(SOURCE.encode()).hexdigest()[:12]}.so"


def _compiler():
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return found
    return None


def library(folder):
    """The path of the preloaded library, compiled into ``folder``; None (with a warning) where
    it cannot be built."""
    path = os.path.join(folder, _NAME)
    if os.path.exists(path):
        return path
    cc = _compiler()
    why = "no C compiler (cc, gcc or clang) was found"
    if cc is not None:
        source = os.path.join(folder, "labkit-loopback.c")
        with open(source, "w") as f:
            f.write(SOURCE)
        try:
            done = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", path, source, "-ldl"],
                                  capture_output=True, text=True, timeout=120)
            if done.returncode == 0:
                return path
            why = f"{cc} failed: {done.stderr.strip()[-500:]}"
        except (OSError, subprocess.SubprocessError) as exc:
            why = f"{cc} failed: {exc}"
    warnings.warn(f"lk.dist: the MPI launcher of this local cluster listens on every network "
                  f"interface (Open MPI binds its out-of-band channel to any address), because "
                  f"the small library that keeps it on loopback could not be built: {why}. "
                  f"Install a C compiler (e.g. apt-get install gcc) to keep it on loopback.",
                  RuntimeWarning, stacklevel=3)
    return None


def local_env(folder, environ=None):
    """Environment variables that keep the MPI processes of a local cluster on loopback."""
    environ = os.environ if environ is None else environ
    env = {}
    if "OMPI_MCA_btl" not in environ:
        env["OMPI_MCA_btl"] = "^tcp"
    shim = library(folder)
    if shim is not None:
        env["LD_PRELOAD"] = ":".join(p for p in (shim, environ.get("LD_PRELOAD")) if p)
    return env
