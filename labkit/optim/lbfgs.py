"""L-BFGS: quasi-Newton steps from a short history of gradient differences, with an optional
strong-Wolfe line search. It calls the loss many times per step, so ``step`` takes a closure."""
from ..autodiff import enable_grad, no_grad
from ..errors import LabkitError
from ..graph.capture import current_graph
from ..tensor.ops.elementwise import abs as _abs
from ..tensor.ops.linalg import matmul
from ..tensor.ops.reduce import max as _max
from ..tensor.ops.reduce import sum as _sum
from ..tensor.ops.shape import concat, reshape
from .optimizer import Optimizer


class LBFGS(Optimizer):
    """PyTorch's LBFGS (one parameter group; ``step(closure)``, where ``closure`` clears the
    gradients, computes the loss, calls ``backward()`` and returns the loss).

    Each ``step`` runs up to ``max_iter`` iterations (``max_eval`` closure calls): the direction
    is minus the gradient times the L-BFGS inverse-Hessian estimate from the last
    ``history_size`` steps; the step length is ``lr`` (the first iteration scaled by the
    gradient's 1-norm), or found by ``line_search_fn="strong_wolfe"``. It stops early when the
    gradient's largest entry is at most ``tolerance_grad`` or progress is below
    ``tolerance_change``. Its decisions read values, so it runs eagerly (not in lk.function).

    >>> import labkit as lk
    >>> x = lk.nn.Parameter(lk.tensor([1.5, -0.5], dtype=lk.float64))
    >>> opt = lk.optim.LBFGS([x], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((x - lk.tensor([1.0, 2.0], dtype=lk.float64)) ** 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> _ = opt.step(closure)
    >>> [round(v, 6) for v in x.tolist()]
    [1.0, 2.0]
    """

    _shaped_state = False      # flat vectors and lists of them, on the first parameter

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn={line_search_fn!r}; only None and "
                             f"'strong_wolfe' are supported")
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size, line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups): "
                             "pass one list of parameters")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self):
        return concat(*[reshape(p.grad if p.grad is not None else p * 0, shape=(p.numel(),))
                        for p in self._params], dim=0)

    def _add(self, t, d):
        """Every parameter += t * (its part of the flat direction d)."""
        offset = 0
        for p in self._params:
            n = p.numel()
            p.assign_add(reshape(d[offset:offset + n], shape=p.shape) * t)
            offset += n

    def _evaluate(self, closure, x, t, d):
        """Loss and flat gradient at x + t d (parameters left at x)."""
        self._add(t, d)
        with enable_grad():
            loss = float(closure())
        flat = self._flat_grad()
        for p, v in zip(self._params, x):
            p.assign(v)
        return loss, flat

    def step(self, closure):
        """One L-BFGS step (up to ``max_iter`` iterations); returns the first loss."""
        if current_graph() is not None:
            raise LabkitError("LBFGS.step cannot run inside lk.function: its iterations and "
                              "line search decide from the loss's values. Call it eagerly, "
                              "and capture the closure's computation instead if it is costly.")
        self._step_calls = getattr(self, "_step_calls", 0) + 1
        group = self.param_groups[0]
        lr = float(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history = group["history_size"]
        # all of L-BFGS's state is kept on the first parameter, as PyTorch does
        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        with no_grad():
            flat = self._flat_grad()
            if _largest(flat) <= tol_grad:
                return orig_loss
            d, t = state.get("d"), state.get("t")
            old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
            h_diag, prev_flat, prev_loss = (state.get("H_diag"), state.get("prev_flat_grad"),
                                            state.get("prev_loss"))
            n_iter = 0
            while n_iter < max_iter:
                n_iter += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    d = -flat
                    old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
                else:
                    y = flat - prev_flat
                    s = d * t
                    ys = _dot(y, s)
                    if ys > 1e-10:
                        if len(old_dirs) == history:
                            old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                        old_dirs.append(y)
                        old_stps.append(s)
                        ro.append(1.0 / ys)
                        h_diag = ys / _dot(y, y)
                    al = state.setdefault("al", [None] * history)
                    q = -flat
                    for i in range(len(old_dirs) - 1, -1, -1):
                        al[i] = _dot(old_stps[i], q) * ro[i]
                        q = q + old_dirs[i] * -al[i]
                    d = q * h_diag
                    for i in range(len(old_dirs)):
                        be_i = _dot(old_dirs[i], d) * ro[i]
                        d = d + old_stps[i] * (al[i] - be_i)
                prev_flat = flat
                prev_loss = loss
                if state["n_iter"] == 1:
                    t = min(1.0, 1.0 / float(_sum(_abs(flat)))) * lr
                else:
                    t = lr
                gtd = _dot(flat, d)
                if gtd > -tol_change:
                    break
                if group["line_search_fn"] is not None:
                    x0 = [p + 0 for p in self._params]
                    loss, flat, t, ls_evals = _strong_wolfe(
                        lambda x, t, d: self._evaluate(closure, x, t, d), x0, t, d, loss,
                        flat, gtd, tolerance_change=tol_change, max_ls=max_eval - evals)
                    self._add(t, d)
                    done = _largest(flat) <= tol_grad
                else:
                    self._add(t, d)
                    ls_evals, done = 0, False
                    if n_iter != max_iter:   # no use re-evaluating after the last iteration
                        with enable_grad():
                            loss = float(closure())
                        flat = self._flat_grad()
                        done = _largest(flat) <= tol_grad
                        ls_evals = 1
                evals += ls_evals
                state["func_evals"] += ls_evals
                if n_iter == max_iter or evals >= max_eval or done:
                    break
                if _largest(d * t) <= tol_change or abs(loss - prev_loss) < tol_change:
                    break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat, prev_loss=prev_loss)
        return orig_loss


def _dot(a, b):
    return float(matmul(a, b))


def _largest(v):
    return float(_max(_abs(v)))


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, slope g1) and (x2, f2, slope g2), clipped to
    ``bounds`` (default: the interval between them); its middle where the cubic has none."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = d2_square ** 0.5
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, lo), hi)


def _strong_wolfe(evaluate, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """A step length t along d satisfying the strong Wolfe conditions (bracket, then zoom),
    as PyTorch's (after Torch7's lswolfe). Returns (loss, flat gradient, t, evaluations)."""
    d_norm = _largest(d)
    f_new, g_new = evaluate(x, t, d)
    evals = 1
    gtd_new = _dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    it = 0
    while it < max_ls:          # bracket an interval holding a point that satisfies them
        if f_new > (f + c1 * t * gtd) or (it > 1 and f_new >= f_prev):
            bracket, b_f, b_g, b_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, b_f, b_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, b_f, b_g, b_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        t_next = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                    bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = evaluate(x, t, d)
        evals += 1
        gtd_new = _dot(g_new, d)
        it += 1
    if it == max_ls:
        bracket, b_f, b_g = [0, t], [f, f_new], [g, g_new]
    insufficient = False
    low, high = (0, 1) if b_f[0] <= b_f[-1] else (1, 0)
    while not done and it < max_ls:      # zoom in on the bracket
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], b_f[0], b_gtd[0], bracket[1], b_f[1], b_gtd[1])
        top, bottom = max(bracket), min(bracket)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:   # too close to an end: move in, unless first time
            if insufficient or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(x, t, d)
        evals += 1
        gtd_new = _dot(g_new, d)
        it += 1
        if f_new > (f + c1 * t * gtd) or f_new >= b_f[low]:
            bracket[high], b_f[high], b_g[high], b_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if b_f[0] <= b_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], b_f[high], b_g[high], b_gtd[high] = \
                    bracket[low], b_f[low], b_g[low], b_gtd[low]
            bracket[low], b_f[low], b_g[low], b_gtd[low] = t, f_new, g_new, gtd_new
    return b_f[low], b_g[low], bracket[low], evals
