"""The ready adapters (``--engine torch|jax|autograd|tensorflow``) against the shipped cases,
their declared conventions against what each engine really does at kinks and ties, and a
user's custom op through each.

Real engines, never mocked. A stock engine must come out green: every shipped case
passes, those whose only differences are kinks and ties its `conventions` declare with a
`convention` note (the diagnosis honours declared conventions, SPEC §4).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engines_for_tests import load_cases
from gradcheck.cases import Case, load_paths
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.loading import load_engine
from gradcheck.engines.reverse import run_engine
from gradcheck.errors import UsageError
from gradcheck.expression import parse
from gradcheck.ops.user import load_ops_files
from gradcheck.references.cache import ReferenceCache
from gradcheck.runner import RunOptions, check_case, run

ROOT = Path(__file__).resolve().parents[1]
STOCK = ["torch", "jax", "autograd"]
# TensorFlow's conventions (SPEC §6.1): what an engine follows unless it declares otherwise.
TF_CONVENTIONS = {
    "relu": "zero",
    "abs": "zero",
    "maximum": "first",
    "minimum": "first",
    "max": "split",
    "min": "split",
    "pow": "zero",
    "clip": "pass",
    "leaky_relu": "alpha",
    "elu": "negative",
    "selu": "positive",
    "max_pool2d": "first",
    "max_pool1d": "first",
}


@pytest.fixture(scope="module")
def options(tmp_path_factory: pytest.TempPathFactory) -> RunOptions:
    """One reference cache for the module: TensorFlow computes each shipped case once."""
    return RunOptions(cache=ReferenceCache(tmp_path_factory.mktemp("cache")))


def shipped() -> list[Case]:
    return [c for c in load_paths([ROOT / "cases"]) if isinstance(c, Case)]


@pytest.mark.parametrize("spec", STOCK)
def test_the_stock_engine_passes_the_shipped_suite(spec: str, options: RunOptions) -> None:
    factory = load_engine(spec)
    cases = shipped()
    result = run(cases, factory, options)
    failing = [(c.name, c.status, c.message, [h.code for h in c.hints]) for c in result.cases]
    assert all(c.passed for c in result.cases), [
        f for f in failing if f[1] not in ("passed", "skipped")
    ]
    # Skips allowed: autograd's forward mode lacks a few ops' JVPs (inv, cholesky and
    # slogdet among them); anything more means an adapter lost ops.
    assert sum(c.status == "passed" for c in result.cases) >= len(cases) - 8
    noted = [c.name for c in result.cases if any(i.hints for i in c.inputs)]
    assert noted, "a declared convention matters in some shipped case"


@pytest.mark.parametrize("spec", ["torch", "autograd"])
def test_the_stock_engine_passes_against_finite_differences(spec: str) -> None:
    factory = load_engine(spec)
    result = run(shipped(), factory, RunOptions(reference="numeric"))
    assert all(c.passed for c in result.cases), [
        (c.name, c.message) for c in result.cases if not c.passed
    ]


# --- the declared conventions are what the engine does --------------------------------------


def probe(engine_factory, expr: str, inputs: dict[str, list[float]], wrt: list[str]):
    values = {k: np.asarray(v, np.float64) for k, v in inputs.items()}
    expression = parse(expr, {k: v.shape for k, v in values.items()})
    cotangent = np.ones(expression.output.shape)
    with np.errstate(all="ignore"):  # log(-2) in the exponent's gradient, by some engines
        got = run_engine(engine_factory(), expression, values, wrt, cotangent)
    return [got.grads[name] for name in wrt]


def conventions_followed(factory) -> dict[str, str]:
    """Each non-smooth op's convention, read off the engine's gradients at the kink."""
    names = {0.0: "zero", 0.5: "half", 1.0: "one"}
    (relu,) = probe(factory, "relu(x)", {"x": [0.0]}, ["x"])
    (abs_,) = probe(factory, "abs(x)", {"x": [0.0]}, ["x"])
    found = {"relu": names[float(relu[0])], "abs": names[float(abs_[0])]}
    ties = {(1.0, 0.0): "first", (0.5, 0.5): "split", (0.0, 1.0): "second"}
    for op in ("maximum", "minimum"):
        a, b = probe(factory, f"{op}(a, b)", {"a": [2.0], "b": [2.0]}, ["a", "b"])
        found[op] = ties.get((float(a[0]), float(b[0])), "none")
    spreads = {(1 / 3,) * 3: "split", (1, 0, 0): "first", (0, 0, 1): "last", (1, 1, 1): "all"}
    for op in ("max", "min"):
        (x,) = probe(factory, f"{op}(x)", {"x": [3.0, 3.0, 3.0]}, ["x"])
        spread = tuple(round(float(share), 12) for share in x)
        found[op] = {tuple(round(v, 12) for v in k): n for k, n in spreads.items()}.get(
            spread, "other"
        )
    (_, exponent) = probe(factory, "pow(a, b)", {"a": [-2.0], "b": [2.0]}, ["a", "b"])
    found["pow"] = "nan" if np.isnan(exponent[0]) else "zero" if exponent[0] == 0 else "other"
    (bounds,) = probe(factory, "clip(x, 0.0, 1.0)", {"x": [0.0, 1.0]}, ["x"])
    found["clip"] = {(1.0, 1.0): "pass", (0.5, 0.5): "half", (0.0, 0.0): "stop"}.get(
        tuple(float(v) for v in bounds), "other"
    )
    slopes = {
        "leaky_relu": {0.2: "alpha", 1.0: "one"},
        "elu": {0.5: "negative", 1.0: "positive"},
        "selu": {1.0507009873554805: "positive", 1.7580993408473766: "negative"},
    }
    for op, names_ in slopes.items():
        attrs = ", alpha=0.5" if op == "elu" else ""
        (x,) = probe(factory, f"{op}(x{attrs})", {"x": [0.0]}, ["x"])
        found[op] = {round(k, 12): n for k, n in names_.items()}.get(
            round(float(x[0]), 12), "other"
        )
    # A max-pool's window of three tied elements (1-D, and 2-D as a 1x3 window).
    pools = {(1.0, 0.0, 0.0): "first", (1 / 3,) * 3: "split"}
    for op, shape, ksize in (
        ("max_pool1d", (1, 3, 1), "3"),
        ("max_pool2d", (1, 1, 3, 1), "[1, 3]"),
    ):
        values = {"x": np.full(shape, 2.0).tolist()}
        (x,) = probe(factory, f"{op}(x, ksize={ksize})", values, ["x"])
        spread = tuple(round(float(v), 12) for v in np.ravel(x))
        found[op] = {tuple(round(v, 12) for v in k): n for k, n in pools.items()}.get(
            spread, "other"
        )
    return found


@pytest.mark.parametrize("spec", [*STOCK, "tensorflow", "builtin"])
def test_declared_conventions_are_what_the_engine_does(spec: str) -> None:
    factory = load_engine(spec)
    declared = {**TF_CONVENTIONS, **getattr(factory, "conventions", {})}
    assert conventions_followed(factory) == declared


# --- dtypes ------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", STOCK)
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_the_stock_engine_computes_in_the_case_dtype(spec: str, dtype: str, tmp_path) -> None:
    # Half precision: engines round differently from TensorFlow by an ulp (the diagnosis
    # says `precision`); what is checked here is the dtype, with a tolerance of a few ulps.
    tolerance = "{rtol: 0.01, atol: 0.01}" if dtype in ("float16", "bfloat16") else "{}"
    (case,) = load_cases(
        tmp_path,
        f"""
        cases:
          - name: typed
            expr: sum(tanh(x) @ w, axis=0)
            dtype: {dtype}
            tolerance: {tolerance}
            inputs: {{x: {{shape: [2, 3]}}, w: {{shape: [3, 2]}}}}
            cotangent: random
        """,
    )
    got = run_engine(load_engine(spec)(), case.expression, case.inputs, case.wrt, case.cotangent)
    dtypes = {got.forward.dtype.name} | {g.dtype.name for g in got.grads.values()}
    if dtype == "bfloat16":
        # The driver reads bfloat16 results as float64; autograd's come partly in float32,
        # since NumPy has no bfloat16 matmul (ml_dtypes promotes it).
        assert dtypes <= {"float64", "float32"}
    else:
        assert dtypes == {dtype}  # JAX's x64 switch: float64 stays float64
    assert check_case(case, load_engine(spec)).status == "passed"


# --- a user's custom op through the stock adapter ----------------------------------------

SMOOTH_RELU_OPS = ROOT / "examples" / "custom_op" / "smooth_relu_ops.py"


def wrong_torch_smooth_relu():
    import torch

    example = load_engine(str(ROOT / "examples" / "custom_op" / "torch_engine.py"))

    class Wrong(sys.modules[example.__module__].SmoothRelu):
        @staticmethod
        def backward(ctx, upstream):
            (x,) = ctx.saved_tensors
            return upstream * torch.sigmoid(-x)  # the sign of x lost

    class Engine(example):
        def smooth_relu(self, x):
            return Wrong.apply(x)

    return Engine


def wrong_jax_smooth_relu():
    import jax
    import jax.numpy as jnp

    from gradcheck.engines.stock.jax import JaxEngine

    @jax.custom_vjp
    def smooth_relu(x):
        return jnp.logaddexp(0.0, x)

    smooth_relu.defvjp(lambda x: (smooth_relu(x), x), lambda x, g: (g * jax.nn.sigmoid(-x),))

    class Engine(JaxEngine):
        def smooth_relu(self, x):
            return smooth_relu(x)

    return Engine


@pytest.mark.parametrize("make", [wrong_torch_smooth_relu, wrong_jax_smooth_relu])
@pytest.mark.parametrize("reference", ["tensorflow", "numeric"])
def test_a_wrong_custom_gradient_is_named(make, reference: str) -> None:
    load_ops_files([SMOOTH_RELU_OPS])
    (case,) = [
        c
        for c in load_paths([ROOT / "examples" / "custom_op" / "cases.yaml"])
        if c.name == "smooth_relu_layer"
    ]
    result = check_case(case, make(), RunOptions(reference=reference))
    assert result.status == "failed"
    top = result.hints[0]
    assert (top.code, top.op, top.node) == ("op-vjp", "smooth_relu", "smooth_relu(x @ w + b)")
    assert [n.op for n in result.nodes if n.status == "failed"] == ["smooth_relu"]


# --- choosing and installing --------------------------------------------------------------


def test_stock_names_resolve_to_the_ready_adapters() -> None:
    assert [load_engine(s).name for s in STOCK] == STOCK
    assert load_engine("tensorflow").name == "tensorflow"


def test_a_missing_extra_says_what_to_install() -> None:
    hide = (
        "import importlib.abc, sys\n"
        "class Hide(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'jax':\n"
        "            raise ModuleNotFoundError(name, name=name)\n"
        "sys.meta_path.insert(0, Hide())\n"
        "from gradcheck.engines.loading import load_engine\n"
        "load_engine('jax')\n"
    )
    done = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "--engine jax needs `pip install 'gradcheck[jax]'`" in done.stderr
    with pytest.raises(UsageError):
        load_engine("nonexistent_module_xyz")
    assert load_engine("builtin") is BuiltinEngine


@pytest.mark.parametrize(
    ("spec", "expr", "value"),
    [
        # `gradcheck fuzz --engine torch` found it: permute() of a 0-d tensor needs dims.
        ("torch", "transpose(x)", 1.5),
        # ... and `--engine autograd`: autograd's logsumexp of a 0-d input under keepdims
        # is (1,)-shaped, and its VJP raises.
        ("autograd", "logsumexp(x, keepdims=True)", 1.5),
        ("autograd", "logsumexp(sum(x), keepdims=True)", [1.5, -0.5]),
    ],
)
def test_scalar_corners_the_fuzzer_found(spec, expr, value, options, tmp_path) -> None:
    (case,) = load_cases(
        tmp_path,
        f"cases:\n  - name: corner\n    expr: {expr}\n    cotangent: random\n"
        f"    inputs: {{x: {value}}}\n",
    )
    result = check_case(case, load_engine(spec), options)
    assert result.status == "passed", (result.message, [h.code for h in result.hints])


@pytest.mark.parametrize("spec", ["torch", "autograd"])
def test_the_stock_engine_survives_the_fuzzer(spec: str) -> None:
    """Generated cases reach corners no shipped case has (0-d inputs, keepdims on
    scalars); a stock engine must come out of them clean too. (JAX compiles every op it
    runs and would cost minutes here; it came out clean over 300 examples by hand.)"""
    import gradcheck

    report = gradcheck.fuzz(engine=spec, max_examples=300, seed=0)
    assert not report.bugs, [(bug.key, bug.text) for bug in report.bugs]


# --- JAX compiles once per expression structure ------------------------------------------


def counting_jax_engine():
    """JaxEngine counting its `tanh` calls: one per forward value (run eagerly) and one per
    trace of a compiled program (a compiled program runs no Python)."""
    from gradcheck.engines.stock.jax import JaxEngine

    class Counting(JaxEngine):
        calls = 0

        def tanh(self, x):
            type(self).calls += 1
            return super().tanh(x)

    return Counting


def jax_case(seed: int, shape: list[int]) -> Case:
    from gradcheck.cases.loader import load_case

    spec = {"shape": shape, "init": "uniform", "low": 0.5, "high": 2.0}
    data = {"name": f"tanh_mul_{seed}", "expr": "tanh(x) * y", "wrt": ["x"], "seed": seed}
    case = load_case({**data, "inputs": {"x": spec, "y": spec}})
    assert isinstance(case, Case)
    return case


def test_jax_compiles_one_program_for_checks_of_one_structure() -> None:
    """Cases of one expression and shapes share a compiled pullback, their other inputs
    (`y`, not differentiated) passed to it rather than baked in: each case's gradient,
    y * (1 - tanh(x)**2) times its cotangent, is its own, checked against TensorFlow
    and by hand. A new shape compiles anew."""
    engine = counting_jax_engine()
    options = RunOptions(diagnose=False)
    for seed in (1, 2, 3):
        case = jax_case(seed, [3, 4])
        x, y, cotangent = case.inputs["x"], case.inputs["y"], case.cotangent
        got = run_engine(engine(), case.expression, case.inputs, ["x"], cotangent, ask_twice=True)
        np.testing.assert_allclose(got.grads["x"], cotangent * y * (1 - np.tanh(x) ** 2))
        np.testing.assert_array_equal(got.grads_again["x"], got.grads["x"])
        assert check_case(case, engine, options).status == "passed"
    # Six forward values (three run_engine, three check_case calls), one trace.
    assert engine.calls == 6 + 1
    case = jax_case(4, [5])
    run_engine(engine(), case.expression, case.inputs, ["x"], case.cotangent)
    assert engine.calls == 7 + 2
