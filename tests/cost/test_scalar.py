"""The scalar pricing twins (sim/cost/scalar.py) equal numpy bit for bit, and every cost
model's shape pricing (shape_times, run_times, shape_time1) equals step_times of the plan.

The fast core (sim/fast) prices steps through the twins and the shape methods, the general
engine through step_times; any last-bit difference would move a step's end by a
nanosecond and the two cores would drift apart. So every comparison here is ``==``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim.cost.scalar as scalar
from sim.cost.base import StepShape
from sim.cost.fitted import FittedCost, _bilinear
from sim.cost.scalar import SCALAR_RUN_MAX, bilinear1, interp1
from sim.engine.clock import to_ns
from sim.engine.plan import StepPlan
from sim.runner import build_cost
from tests.fast.equivalence import prepared

_EMPTY = np.zeros(0, dtype=np.int64)


# ---- interp1 and bilinear1 against numpy --------------------------------------------------
@st.composite
def nodes(draw, max_size=8):
    """Strictly ascending nodes: a start and positive steps (some tiny, some wide)."""
    start = draw(st.floats(-40, 40))
    steps = draw(st.lists(st.sampled_from([1e-9, 1e-3, 0.1, 0.5, 1.0, 3.7, 17.0]),
                          min_size=0, max_size=max_size - 1))
    xs = [start]
    for s in steps:
        xs.append(xs[-1] + s * draw(st.floats(0.5, 2.0)))
    return xs


def probes(xs: list[float], rng: np.random.Generator, extra: int = 30) -> list[float]:
    """Every node, its neighbouring doubles, the midpoints, points outside the range and
    random points inside and around it."""
    lo, hi = xs[0], xs[-1]
    pts = list(xs)
    pts += [float(np.nextafter(x, -np.inf)) for x in xs]
    pts += [float(np.nextafter(x, np.inf)) for x in xs]
    pts += [(a + b) / 2 for a, b in zip(xs, xs[1:])]
    pts += [lo - 1.0, lo - 1e-12, hi + 1e-12, hi + 1.0, lo - 1e6, hi + 1e6]
    span = max(hi - lo, 1.0)
    pts += rng.uniform(lo - 0.2 * span, hi + 0.2 * span, extra).tolist()
    return pts


def values(draw, n: int) -> list[float]:
    return draw(st.lists(st.floats(-12, 12), min_size=n, max_size=n))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_interp1_is_np_interp(data):
    xs = data.draw(nodes())
    ys = values(data.draw, len(xs))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    pts = probes(xs, rng)
    want = np.interp(np.array(pts), np.array(xs), np.array(ys)).tolist()
    got = [interp1(x, xs, ys) for x in pts]
    assert got == want
    # numpy on one point takes another branch (no precomputed slopes): the same doubles
    assert [float(np.interp(x, xs, ys)) for x in pts[::7]] == want[::7]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_bilinear1_is_the_vectorised_bilinear(data):
    n0, n1 = data.draw(nodes(6)), data.draw(nodes(6))  # one node: constant along the axis
    vals = np.array([values(data.draw, len(n1)) for _ in n0])
    table = (vals, [np.array(n0), np.array(n1)])
    twin = (vals.tolist(), [list(n0), list(n1)])
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    p0, p1 = probes(n0, rng, 12), probes(n1, rng, 12)
    x0 = np.repeat(p0, len(p1))
    x1 = np.tile(p1, len(p0))
    want = _bilinear(table, x0, x1).tolist()
    got = [bilinear1(twin, a, b) for a, b in zip(x0.tolist(), x1.tolist())]
    assert got == want


def test_single_node_tables():
    assert interp1(5.0, [2.0], [7.5]) == np.interp(5.0, [2.0], [7.5]) == 7.5
    assert interp1(-5.0, [2.0], [7.5]) == 7.5 and interp1(2.0, [2.0], [7.5]) == 7.5
    vals = np.array([[1.5]])
    for x0, x1 in [(0.0, 0.0), (-3.0, 9.0), (1e9, -1e9)]:
        want = float(_bilinear((vals, [np.array([1.0]), np.array([2.0])]),
                               np.array([x0]), np.array([x1]))[0])
        assert bilinear1(([[1.5]], [[1.0], [2.0]]), x0, x1) == want == 1.5


# ---- the fitted model's twins ----------------------------------------------------------------
def _numpy_log_exp(monkeypatch) -> None:
    """The twins' log2/exp2 are libm's where they equal numpy's on this machine (checked at
    import, sim.cost.scalar.LIBM_IS_NUMPY), else numpy's own: force the second path (taken
    where numpy vectorises them, e.g. SVML on AVX-512) on any machine."""
    monkeypatch.setattr(scalar, "_log2_1", lambda x: float(np.log2(x)))
    monkeypatch.setattr(scalar, "_exp2_1", lambda x: float(np.exp2(x)))
    monkeypatch.setattr(scalar, "_log2_list", lambda xs: np.log2(xs).tolist())
    monkeypatch.setattr(scalar, "_exp2_list", lambda xs: np.exp2(xs).tolist())
    monkeypatch.setattr(scalar, "LIBM_IS_NUMPY", False)  # no single-pass libm run pricing


@pytest.fixture(params=["as imported", "numpy's"])
def log_exp(request, monkeypatch):
    if request.param == "numpy's":
        _numpy_log_exp(monkeypatch)
    return request.param


@pytest.fixture(scope="module")
def fitted() -> FittedCost:
    r, _ = prepared(None)  # the default scenario: Llama-3-8B, the shipped h100-sxm/vllm fit
    cost = build_cost(r)
    assert isinstance(cost, FittedCost) and cost.file.kind == "ops"
    return cost


def test_fitted_twins_on_random_points(fitted, log_exp):
    rng = np.random.default_rng(13)
    c = fitted
    for _ in range(1000):
        n = int(rng.integers(1, 1025))
        ctx0 = int(rng.integers(0, n * 8192))
        k = int(rng.integers(1, 48))
        fixed = c._fixed(n, n, _EMPTY, _EMPTY)
        steps = ctx0 + n * np.arange(k, dtype=np.int64)
        want = c.layers * c._decode(n, steps) + fixed
        assert c.decode_run_times(n, ctx0, k, fixed) == want.tolist(), (n, ctx0, k)
        assert c.decode_run_times(n, ctx0, k, fixed, to_ns=True) == to_ns(want).tolist()
        assert c._decode_one(n, ctx0) == float(c._decode(n, np.array([ctx0]))[0])
        m = int(rng.integers(1, 8))  # the scalar path prices up to 7 prefill requests
        q, p = rng.integers(1, 16385, m), rng.integers(0, 65536, m)
        assert c._prefill_few(q.tolist(), p.tolist()) == c._prefill_batch(q, p), (q, p)


@pytest.mark.parametrize("q,p", [((1,), (0,)), ((2,), (0,)), ((1,), (1,)), ((16,), (16,)),
                                 ((8192,), (0,)), ((1,), (131071,)), ((131072,), (0,)),
                                 ((3,), (1 << 20,)), ((1, 1), (0, 0)), ((1, 8192), (131071, 0)),
                                 ((5, 1, 70000, 2, 9, 4096, 1), (0, 7, 3, 65536, 1, 0, 1))])
def test_fitted_prefill_twin_at_the_edges(fitted, log_exp, q, p):
    assert fitted._prefill_few(q, p) == fitted._prefill_batch(np.array(q), np.array(p))


@pytest.mark.parametrize("n,ctx0", [(1, 0), (1, 1), (2, 0), (1024, 0), (1024, 1024 * 131072),
                                    (7, 3), (4096, 1)])
def test_fitted_decode_twins_at_the_edges(fitted, log_exp, n, ctx0):
    fixed = fitted._fixed(n, n, _EMPTY, _EMPTY)
    for k in (1, 2, SCALAR_RUN_MAX, SCALAR_RUN_MAX + 1):
        steps = ctx0 + n * np.arange(k, dtype=np.int64)
        assert fitted.decode_run_times(n, ctx0, k, fixed) == \
            (fitted.layers * fitted._decode(n, steps) + fixed).tolist()


# ---- shape pricing against step_times, every shape-priced model ------------------------------
LINEAR = ("cost={name: linear, base_ms: 3, prefill_token_ms: 0.07, decode_seq_ms: 0.02, "
          "context_token_ms: 0.0003}")
MODELS = {
    "fitted": (None, ()),  # the default scenario's cost
    "roofline": (None, ("cost={name: roofline}",)),
    "linear": (None, (LINEAR,)),
    "fitted-tp2": ("llama70b-tp2-h100", ("cost={name: fitted}",)),
    # every step eager (launch-bound or not): the max(kernels, launches) rule in each path
    "fitted-eager": (None, ("engine.enforce_eager=true",)),
    "roofline-tp2": ("llama70b-tp2-h100", ("cost={name: roofline}",)),
}


NUMPY_LOG_EXP = "fitted, numpy's log2/exp2"


@pytest.fixture(scope="module")
def costs() -> dict:
    out = {}
    for name, (scenario, sets) in MODELS.items():
        r, _ = prepared(scenario, *sets)
        out[name] = build_cost(r)
        assert out[name].prices_shapes and r.scenario.cost.name == name.split("-")[0]
    return out


@pytest.fixture(params=[*sorted(MODELS), NUMPY_LOG_EXP])
def cost(request, costs, monkeypatch):
    if request.param == NUMPY_LOG_EXP:
        _numpy_log_exp(monkeypatch)
        return costs["fitted"]
    return costs[request.param]


@st.composite
def plans(draw) -> StepPlan:
    """A step: decode-shaped requests (one token; contexts up to 64k), prefill chunks (q > 1
    at a context), one-token prefill tails; or a pure-decode run of up to 60 steps."""
    n_dec = draw(st.integers(0, 300))
    top = draw(st.sampled_from([1, 16, 4096, 65536]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    ctx = rng.integers(0, top, n_dec).tolist()
    chunks = draw(st.lists(st.tuples(st.integers(2, 8192), st.integers(0, 32768)),
                           max_size=10))  # up to 7: the fitted model's scalar path
    if not n_dec and not chunks:
        n_dec, ctx = 1, [0]
    tok = [1] * n_dec + [q for q, _ in chunks]
    ctx = ctx + [p for _, p in chunks]
    order = draw(st.permutations(range(len(tok))))
    tok, ctx = [tok[i] for i in order], [ctx[i] for i in order]
    k = draw(st.integers(1, 60)) if not chunks else 1
    return StepPlan.build(np.arange(len(tok)), tok, ctx, num_steps=k,
                          interruptible=draw(st.booleans()))


def _shape_args(plan: StepPlan) -> tuple:
    s = StepShape.of(plan)
    return (s.total_tokens, s.num_reqs, s.prefill_q, s.prefill_ctx, s.num_decode,
            int(s.decode_ctx[0]))


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans())
def test_shape_pricing_is_step_times(cost, plan):
    want = cost.step_times(plan)
    args = _shape_args(plan)
    assert np.array_equal(cost.shape_times(*args, plan.num_steps), want)
    assert cost.shape_time1(*args) == float(want[0])


def _decode_plan(n: int, ctx: np.ndarray, k: int) -> StepPlan:
    return StepPlan.build(np.arange(n), np.ones(n, dtype=np.int64), ctx, num_steps=k)


def test_runs_priced_in_pieces_are_the_plans_steps(cost):
    # the fast core prices a decode run of K steps in pieces (a first guess, then further
    # steps; a run an arrival cuts short keeps its first steps): steps j..j+m-1 priced on
    # their own must be those steps of the K-step plan, to the nanosecond
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 513))
        ctx = rng.integers(0, int(rng.choice([2, 4096, 32768])), n)
        ctx0 = int(ctx.sum())
        k = int(rng.integers(2, 100))
        want = cost.step_times(_decode_plan(n, ctx, k))
        want_ns = to_ns(want).tolist()
        assert cost.run_times(n, ctx0, k) == want.tolist(), (n, ctx0, k)
        assert cost.run_ns(n, ctx0, k) == want_ns, (n, ctx0, k)
        j = int(rng.integers(0, k))
        m = int(rng.integers(1, k - j + 1))
        assert cost.run_ns(n, ctx0 + n * j, m) == want_ns[j:j + m], (n, ctx0, k, j, m)
        assert cost.run_times(n, ctx0 + n * j, m) == want.tolist()[j:j + m]
        one = cost.step_times(_decode_plan(n, ctx, 1))  # a one-step plan: shape_time1
        assert cost.shape_time1(n, n, _EMPTY, _EMPTY, n, ctx0) == float(one[0])
