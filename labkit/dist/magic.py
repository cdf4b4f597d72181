"""``%%lk_dist``: run a notebook cell on every worker of a kept ``lk.dist.Cluster``.

Creating a Cluster in IPython registers the magic. The cell runs on each worker in a namespace
that persists between ``%%lk_dist`` cells (``lk`` is already imported there); if the cell ends
with an expression, its value on every worker comes back as a list in rank order. Output is
streamed as for ``cluster.run``. ``%%lk_dist name`` picks the Cluster held by variable ``name``;
otherwise the most recently created open Cluster is used.

    cluster = lk.dist.Cluster(n=2)

    %%lk_dist
    x = lk.tensor([float(lk.dist.rank())])
    lk.dist.allreduce(x).item()            # -> [1.0, 1.0]
"""
import ast
import weakref

_clusters = []          # weak references to the Clusters created in this process, oldest first
_namespace = None       # on a worker: the namespace %%lk_dist cells run in


def remember(cluster):
    """Note a new Cluster as the default target, and register the magic when in IPython."""
    _clusters.append(weakref.ref(cluster))
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and "lk_dist" not in shell.magics_manager.magics["cell"]:
        shell.register_magic_function(_cell_magic, magic_kind="cell", magic_name="lk_dist")


def default_cluster():
    """The most recently created Cluster that is still open (None if there is none)."""
    for ref in reversed(_clusters):
        c = ref()
        if c is not None and not c.closed:
            return c
    return None


def run_cell(cluster, source):
    """Run ``source`` on every worker of ``cluster``; the value of a final expression per rank."""
    return cluster.run(execute, source)


def execute(source):
    """On a worker: run ``source`` in the persistent %%lk_dist namespace."""
    global _namespace
    if _namespace is None:
        import labkit
        _namespace = {"__name__": "__lk_dist__", "lk": labkit}
    tree = ast.parse(source, "<%%lk_dist cell>")
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<%%lk_dist cell>", "exec"), _namespace)
    if last is None:
        return None
    return eval(compile(ast.Expression(last.value), "<%%lk_dist cell>", "eval"), _namespace)


def _cell_magic(line, cell):
    from IPython import get_ipython
    from .errors import DistError
    name = line.strip()
    if name:
        cluster = get_ipython().user_ns.get(name)
        if cluster is None:
            raise DistError(f"%%lk_dist {name}: no variable {name!r} in this notebook; name a "
                            f"variable holding an lk.dist.Cluster, or leave it out")
    else:
        cluster = default_cluster()
        if cluster is None:
            raise DistError("%%lk_dist: no open lk.dist.Cluster; start one first: "
                            "cluster = lk.dist.Cluster(n=2)")
    results = run_cell(cluster, cell)
    return None if all(r is None for r in results) else results
