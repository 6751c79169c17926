"""User-defined ops (SPEC §9): declared with gradcheck.op, loaded with --ops, and then
usable everywhere a builtin op is: parser, shape check, engines, references, `gradcheck
ops`, the schema, the scaffold and the diagnosis. Bad declarations are usage errors
naming the op and its line."""

from __future__ import annotations

import dataclasses
import itertools
import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcheck
from gradcheck.cases import Case, case_file_schema, load_file
from gradcheck.cli import app
from gradcheck.cli.scaffold import engine_template
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.loading import load_engine
from gradcheck.errors import UsageError
from gradcheck.expression import ExpressionError, parse
from gradcheck.ops import get_op, has_op
from gradcheck.ops.user import RESERVED, OpDeclarationError, load_ops_files
from gradcheck.runner import RunOptions, check_case

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "custom_op"
SMOOTH_RELU_OPS = EXAMPLE / "smooth_relu_ops.py"

OPS = '''
import numpy as np
import gradcheck

@gradcheck.op(
    shape=gradcheck.broadcast_shapes,
    vjps=[lambda g, ans, a, b: g * a / ans, lambda g, ans, a, b: g * b / ans],
    tf=lambda tf, a, b: tf.sqrt(a * a + b * b),
)
def hypot(a, b):
    """sqrt(a ** 2 + b ** 2)"""
    return np.hypot(a, b)

@gradcheck.op(shape=gradcheck.same_shape)
def scaled_tanh(x, *, scale=2.0):
    """scale * tanh(x): no VJPs, no TensorFlow builder"""
    return scale * np.tanh(x)
'''


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def load_case(tmp_path: Path, text: str) -> Case:
    (item,) = load_file(write(tmp_path, "cases.yaml", text))
    assert isinstance(item, Case), item
    return item


@pytest.fixture
def ops_file(tmp_path: Path) -> Path:
    path = write(tmp_path, "my_ops.py", OPS)
    load_ops_files([path])
    return path


# --- the declaration ------------------------------------------------------------------


def test_the_decorator_reads_the_forward_signature(ops_file: Path) -> None:
    hypot, scaled = get_op("hypot"), get_op("scaled_tanh")
    assert (hypot.params, dict(hypot.attrs), hypot.doc) == (("a", "b"), {}, "sqrt(a ** 2 + b ** 2)")
    assert (scaled.params, dict(scaled.attrs)) == (("x",), {"scale": 2.0})
    assert scaled.signature == "scaled_tanh(x, scale=2.0)"
    assert (scaled.vjps, scaled.tf, scaled.tf_name) == ((), None, None)
    line = OPS.splitlines().index("@gradcheck.op(") + 1
    assert hypot.origin == f"{ops_file}:{line}"


def test_loading_is_idempotent_and_returns_the_files_ops(tmp_path: Path) -> None:
    counter = tmp_path / "count.txt"
    path = write(
        tmp_path,
        "counted_ops.py",
        OPS + f"\nopen({str(counter)!r}, 'a').write('x')\n",
    )
    first = load_ops_files([path])
    again = load_ops_files([path, tmp_path / "." / "counted_ops.py"])
    assert [op.name for op in first] == ["hypot", "scaled_tanh"]
    assert again == first + first
    assert counter.read_text() == "x", "the file ran once"


def test_the_public_names_are_importable_without_numpy_first() -> None:
    for name in ("Op", "op", "register_op", "load_ops_files", "same_shape", "broadcast_shapes"):
        assert getattr(gradcheck, name) is not None
    assert gradcheck.Op is type(get_op("add"))


def test_register_op_is_the_long_form(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "long_ops.py",
        """
        import numpy as np
        from gradcheck import Op, register_op, same_shape
        register_op(Op(
            name="cube", params=("x",), shape=same_shape, forward=lambda x: x ** 3,
            vjps=(lambda g, ans, x: 3 * g * x * x,), doc="x ** 3",
        ))
        """,
    )
    (cube,) = load_ops_files([path])
    assert cube.origin == f"{path}:4"
    assert BuiltinEngine().cube is not None


# --- bad declarations: usage errors naming the op and its line --------------------------


BAD = [
    (
        "shadows a builtin",
        "@gradcheck.op(shape=gradcheck.same_shape)\ndef relu(x):\n    return x\n",
        "op 'relu': shadows the builtin op relu",
    ),
    (
        "no shape rule",
        "@gradcheck.op(vjps=[lambda g, ans, x: g])\ndef ident(x):\n    return x\n",
        "op 'ident': no shape rule; pass shape=",
    ),
    (
        "VJP count",
        "@gradcheck.op(shape=gradcheck.broadcast_shapes, vjps=[lambda g, ans, a, b: g])\n"
        "def both(a, b):\n    return a + b\n",
        "op 'both': 1 VJP(s) for 2 parameter(s) (a, b)",
    ),
    (
        "VJP signature",
        "@gradcheck.op(shape=gradcheck.same_shape, vjps=[lambda g, x: g])\n"
        "def ident(x):\n    return x\n",
        "op 'ident': vjps[0] cannot be called as vjps(g, ans, x)",
    ),
    (
        "TensorFlow builder signature",
        "@gradcheck.op(shape=gradcheck.same_shape, tf=lambda x: x)\ndef ident(x):\n    return x\n",
        "op 'ident': tf cannot be called as tf(tf, x)",
    ),
    (
        "an attribute without a default",
        "@gradcheck.op(shape=gradcheck.same_shape)\ndef power(x, *, p):\n    return x ** p\n",
        "op 'power': parameter 'p' of the forward must be",
    ),
    (
        "JVP count",
        "@gradcheck.op(shape=gradcheck.broadcast_shapes, jvps=[lambda t, ans, a, b: t])\n"
        "def both(a, b):\n    return a + b\n",
        "op 'both': 1 JVP(s) for 2 parameter(s) (a, b)",
    ),
    (
        "JVP signature",
        "@gradcheck.op(shape=gradcheck.same_shape, jvps=[lambda t: t])\n"
        "def ident(x):\n    return x\n",
        "op 'ident': jvps[0] cannot be called as jvps(t, ans, x)",
    ),
    (
        "rule texts as one string",
        "@gradcheck.op(shape=gradcheck.same_shape, rules='g')\ndef ident(x):\n    return x\n",
        "op 'ident': rules must be a list of rule texts",
    ),
    (
        "rule text count",
        "@gradcheck.op(shape=gradcheck.broadcast_shapes, jvp_rules=['t'])\n"
        "def both(a, b):\n    return a + b\n",
        "op 'both': 1 text(s) in jvp_rules for 2 parameter(s) (a, b)",
    ),
    (
        "a protocol name",
        "@gradcheck.op(shape=gradcheck.same_shape)\ndef value(x):\n    return x\n",
        "op 'value': the name is taken by the engine protocol",
    ),
]


@pytest.mark.parametrize(("text", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_declaration_names_the_op_and_its_line(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, "bad_ops.py", "import gradcheck\n\n" + text)
    with pytest.raises(OpDeclarationError) as error:
        load_ops_files([path])
    assert str(error.value).startswith(f"{path}:3: ")
    assert message in str(error.value)


def test_reserved_names_cover_what_the_engines_use() -> None:
    from gradcheck.engines.stock.tensorflow import TensorFlowAdapter

    used = {
        name
        for cls in (BuiltinEngine, TensorFlowAdapter)
        for name in dir(cls)
        if not name.startswith("_") and not has_op(name)
    }
    assert used | {"tf", "tapes"} <= RESERVED  # the last two are set in __init__


def test_a_second_declaration_elsewhere_is_refused(tmp_path: Path, ops_file: Path) -> None:
    other = write(tmp_path, "other_ops.py", OPS)
    with pytest.raises(OpDeclarationError, match=f"declared twice \\(first at {ops_file}:"):
        load_ops_files([other])


def test_a_failing_file_withdraws_what_it_declared(tmp_path: Path) -> None:
    path = write(tmp_path, "half_ops.py", OPS + "\nraise RuntimeError('half way')\n")
    with pytest.raises(UsageError, match=r"--ops .*half_ops\.py could not be imported") as error:
        load_ops_files([path])
    assert "RuntimeError: half way" in str(error.value)
    assert not has_op("hypot") and not has_op("scaled_tanh")
    with pytest.raises(UsageError, match="no such file"):
        load_ops_files([tmp_path / "missing.py"])


def test_cli_a_broken_ops_file_is_a_usage_error(tmp_path: Path) -> None:
    path = write(tmp_path, "bad_ops.py", "import gradcheck\n\n" + BAD[0][1])
    result = CliRunner().invoke(app, ["run", str(ROOT / "cases"), "--ops", str(path)])
    assert result.exit_code == 2
    assert f"gradcheck: error: {path}:3: op 'relu': shadows the builtin op" in result.stderr


# --- everywhere a builtin op is -------------------------------------------------------


def test_parser_and_shape_check_know_the_op(ops_file: Path) -> None:
    expression = parse("hypot(x, y) * scaled_tanh(x, scale=3.0)", {"x": (2, 3), "y": (3,)})
    assert expression.output.shape == (2, 3)
    assert expression.op_nodes[1].attrs == {"scale": 3.0}
    with pytest.raises(ExpressionError, match="hypot\\(x, y\\): shapes \\(2, 3\\) and \\(4,\\)"):
        parse("hypot(x, y)", {"x": (2, 3), "y": (4,)})
    with pytest.raises(ExpressionError, match="unknown attribute 'beta'"):
        parse("scaled_tanh(x, beta=1.0)", {"x": (2,)})


def test_an_attribute_may_be_a_string(tmp_path: Path) -> None:
    """Attributes such as conv's `padding='SAME'` arrive as the strings written."""
    path = write(
        tmp_path,
        "scale_ops.py",
        """
        import numpy as np
        import gradcheck

        FACTOR = {"double": 2.0, "half": 0.5}

        @gradcheck.op(
            shape=gradcheck.same_shape, vjps=[lambda g, ans, x, mode: g * FACTOR[mode]]
        )
        def scale_by(x, *, mode="double"):
            return FACTOR[mode] * x
        """,
    )
    load_ops_files([path])
    expression = parse("scale_by(x, mode='half')", {"x": (3,)})
    assert expression.output.attrs == {"mode": "half"}
    case = load_case(
        tmp_path,
        """
        cases:
          - name: half
            expr: scale_by(x, mode='half')
            inputs: {x: [1.0, 2.0, 3.0]}
            reference: numeric
        """,
    )
    result = check_case(case, BuiltinEngine, RunOptions(reference="numeric"))
    assert result.status == "passed", result.message
    assert result.forward.max_abs_diff == 0.0


def test_builtin_engine_and_both_references_judge_an_op_with_vjps(
    tmp_path: Path, ops_file: Path
) -> None:
    case = load_case(
        tmp_path,
        """
        cases:
          - name: hypot_broadcast
            expr: sum(hypot(x, y) * x, axis=0)
            inputs: {x: {shape: [3, 4]}, y: {shape: [4]}}
            cotangent: random
            reference: both
        """,
    )
    result = check_case(case, BuiltinEngine)
    assert result.status == "passed", result.message
    assert result.reference == "both"


def test_an_op_without_vjps_is_skipped_by_the_builtin_engine(
    tmp_path: Path, ops_file: Path
) -> None:
    case = load_case(
        tmp_path,
        """
        cases:
          - name: no_vjps
            expr: scaled_tanh(x) * 2.0
            inputs: {x: {shape: [3]}}
            reference: numeric
        """,
    )
    result = check_case(case, BuiltinEngine)
    assert result.status == "skipped"
    assert "scaled_tanh declares no NumPy VJPs" in result.message


def test_the_tensorflow_reference_needs_a_builder(tmp_path: Path, ops_file: Path) -> None:
    case = load_case(
        tmp_path,
        """
        cases:
          - name: no_builder
            expr: scaled_tanh(x)
            inputs: {x: {shape: [3]}}
        """,
    )
    result = check_case(case, BuiltinEngine)
    assert result.status == "error"
    assert "scaled_tanh" in result.message and "declares no TensorFlow builder" in result.message
    assert "--reference numeric" in result.message


class TanhEngine(BuiltinEngine):
    """The builtin engine with a hand-written VJP for scaled_tanh (declared without one)."""

    def scaled_tanh_vjp(self, g, ans, x, scale):
        return g * scale * (1 - np.tanh(x) ** 2)

    def scaled_tanh(self, x, scale=2.0):
        op = dataclasses.replace(get_op("scaled_tanh"), vjps=(self.scaled_tanh_vjp,))
        return self.apply(op, [x], {"scale": scale})


class WrongTanhEngine(TanhEngine):
    def scaled_tanh_vjp(self, g, ans, x, scale):
        return 3 * super().scaled_tanh_vjp(g, ans, x, scale)


def test_the_numeric_reference_judges_and_localises_an_op_without_vjps(
    tmp_path: Path, ops_file: Path
) -> None:
    case = load_case(
        tmp_path,
        """
        cases:
          - name: engine_op
            expr: sum(scaled_tanh(x * y, scale=2.0) + x, axis=1)
            inputs: {x: {shape: [3, 4]}, y: {shape: [3, 4]}}
            cotangent: random
            reference: numeric
        """,
    )
    assert check_case(case, TanhEngine).status == "passed"
    wrong = check_case(case, WrongTanhEngine)
    assert wrong.status == "failed"
    assert [(n.op, n.status) for n in wrong.nodes if n.status == "failed"] == [
        ("scaled_tanh", "failed")
    ]
    top = wrong.hints[0]
    assert (top.code, top.op, top.node) == (
        "op-vjp",
        "scaled_tanh",
        "scaled_tanh(x * y, scale=2.0)",
    )


def test_cli_ops_schema_and_scaffold_list_user_ops(tmp_path: Path, ops_file: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["ops", "--ops", str(ops_file)], env={"COLUMNS": "240"})
    assert listed.exit_code == 0
    lines = listed.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("scaled_tanh"))
    # The meaning is under the TensorFlow name, on as many lines as the widest signature
    # (conv1d's) leaves it room for: the row is its lines up to the next op's.
    rest = itertools.takewhile(lambda line: line.startswith(" "), lines[at + 1 :])
    row = " ".join([lines[at], *(line.strip() for line in rest)])
    assert "none: --reference numeric" in row and f"[user op, {ops_file}:" in row
    schema = json.loads(runner.invoke(app, ["schema", "--ops", str(ops_file)]).stdout)
    forbidden = schema["$defs"]["case"]["properties"]["inputs"]["propertyNames"]["not"]["enum"]
    assert {"hypot", "scaled_tanh"} <= set(forbidden)
    assert (
        "hypot"
        in case_file_schema()["$defs"]["case"]["properties"]["inputs"]["propertyNames"]["not"][
            "enum"
        ]
    )
    template = engine_template()
    assert "# -- user-defined ops (--ops)" in template
    assert "def scaled_tanh(self, x, scale=2.0):" in template


def test_an_input_may_not_be_named_after_a_user_op(tmp_path: Path, ops_file: Path) -> None:
    (item,) = load_file(
        write(
            tmp_path,
            "c.yaml",
            "cases:\n  - name: c\n    expr: hypot * 2\n    inputs: {hypot: 1.0}\n",
        )
    )
    assert not isinstance(item, Case)
    assert "input name 'hypot' is an op's name" in item.message


# --- the example: one op, three custom gradients -----------------------------------------


@pytest.mark.parametrize("engine", ["tf_engine.py", "torch_engine.py", "jax_engine.py"])
def test_the_custom_op_example_passes_against_tensorflow_and_numeric(engine: str) -> None:
    load_ops_files([SMOOTH_RELU_OPS])
    factory = load_engine(str(EXAMPLE / engine))
    for reference in ("tensorflow", "numeric"):
        items = load_file(EXAMPLE / "cases.yaml")
        results = [check_case(c, factory, RunOptions(reference=reference)) for c in items]
        assert [(r.name, r.status) for r in results] == [(c.name, "passed") for c in items], [
            r.message for r in results
        ]


@pytest.mark.parametrize(
    ("engine", "said"),
    [
        ("torch_engine.py", "SmoothRelu (a torch.autograd.Function) has no forward-mode rule"),
        ("jax_engine.py", "a jax.custom_vjp has no forward-mode rule"),
    ],
)
def test_a_custom_gradient_without_forward_mode_is_unsupported_there(engine: str, said: str):
    """SPEC §12: the stock adapters' custom ops under forward mode are unsupported for that
    check, in the framework's words, never an error, and no message shows a rule as None;
    reverse mode is still checked and passes."""
    load_ops_files([SMOOTH_RELU_OPS])
    factory = load_engine(str(EXAMPLE / engine))
    options = RunOptions(reference="numeric", modes=("rev", "fwd"))
    for case in load_file(EXAMPLE / "cases.yaml"):
        result = check_case(case, factory, options)
        assert result.status == "skipped", result.message
        assert said in result.message and "None" not in result.message
        assert all(i.comparison.passed for i in result.inputs)
