"""gradcheck.torch.check on real PyTorch: correct functions and modules pass, every op
mapped and judged by TensorFlow and finite differences; the bugs of custom Functions,
cuts and hooks are named at their node, with the mechanism, a PyTorch-spelled fix and
the user's line; what tracing cannot reach is refused, saying why and what instead."""

from __future__ import annotations

import inspect
import re

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import gradcheck  # noqa: E402
import gradcheck.torch as gt  # noqa: E402
import traced_functions as tf  # noqa: E402
from gradcheck.tracing.program import TraceError  # noqa: E402

D = torch.float64


def randn(*shape, dtype=D):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(len(shape)))


def module(cls, *args):
    torch.manual_seed(0)
    return cls(*args).double()


def line_of(obj, text: str) -> int:
    """The line of `obj`'s source (in traced_functions.py) holding `text`."""
    lines, start = inspect.getsourcelines(obj)
    return start + next(k for k, line in enumerate(lines) if text in line)


# -- correct code passes, every op mapped ----------------------------------------------

CORRECT = {
    "mlp": lambda: (module(tf.MLP), randn(5, 4)),
    "cnn": lambda: (module(tf.CNN), randn(2, 2, 8, 8), torch.tensor([1, 3])),
    "norms": lambda: (module(tf.Normed), randn(4, 6)),
    "elementwise": lambda: (
        lambda x: (
            x.exp()
            + x.sin() * x.cos()
            - x.abs().sqrt()
            + torch.sigmoid(x) / 3
            + F.gelu(x)
            + F.silu(x)
            + F.elu(x)
            + F.leaky_relu(x, 0.1)
            + F.softplus(x)
            + x.clamp(-0.5, 0.5)
            + torch.where(x > 0, x, x * x)
            + x**3
            - 1 / (2 + x)
            + torch.erf(x)
            + torch.log1p(x * x)
        ).sum(),
        randn(3, 4),
    ),
    "reductions": lambda: (
        lambda x: (
            x.sum(1).prod()
            + x.mean()
            + x.var(0).sum()
            + x.std()
            + x.amax(1).sum()
            + torch.logsumexp(x, 0).sum()
            + x.norm()
            + torch.linalg.vector_norm(x, 1)
            + x.cumsum(1).sum()
            + F.softmax(x, 1)[0, 0]
            + F.log_softmax(x, 0).sum()
        ),
        randn(3, 4),
    ),
    "shapes": lambda: (
        lambda x: (
            (
                torch.cat([x, x.flip(0)], 1)
                .T.reshape(2, -1)[:, 1:5]
                .unsqueeze(0)
                .expand(3, 2, 4)
                .permute(2, 0, 1)
                .roll(1, 0)
                .repeat(1, 2, 1)
                * torch.stack([x[0], x[1]]).sum()
            ).sum()
            + F.pad(x, (1, 2)).sum()
            + sum(p.sum() * k for k, p in enumerate(x.split([1, 3], 1)))
            + x.unbind(0)[2].sum()
        ),
        randn(3, 4),
    ),
    "gathers": lambda: (
        lambda x, idx: (
            (x[idx] * 2).sum()
            + torch.gather(x, 1, idx[:, None]).sum()
            + F.embedding(idx, x).pow(2).sum()
        ),
        randn(3, 4),
        torch.tensor([0, 2, 2]),
    ),
    "linalg": lambda: (
        lambda a, b: (
            torch.linalg.solve(a @ a.T + 4 * torch.eye(3, dtype=D), b).sum()
            + torch.linalg.inv(a + 4 * torch.eye(3, dtype=D)).trace()
            + torch.linalg.slogdet(a @ a.T + torch.eye(3, dtype=D))[1]
            + torch.linalg.cholesky(a @ a.T + torch.eye(3, dtype=D)).sum()
            + torch.einsum("ij,jk->ik", a, b).sum()
            + torch.dot(a[0], a[1])
        ),
        randn(3, 3),
        randn(3, 2),
    ),
    "conv-transpose": lambda: (
        lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1).sum(),
        randn(1, 2, 4, 4),
        randn(2, 3, 3, 3),
    ),
    "losses": lambda: (
        lambda x, t: F.mse_loss(x, t) + F.binary_cross_entropy_with_logits(x, t.sigmoid()),
        randn(3, 4),
        randn(2, 3, 4)[0],
    ),
}


@pytest.mark.parametrize("name", CORRECT)
def test_correct_code_passes_every_op_mapped_against_tensorflow_and_finite_differences(name):
    fn, *args = CORRECT[name]()
    assert gt.check(fn, *args).case.reference == "tensorflow"  # the default, all mapped
    result = gt.check(fn, *args, reference="both")
    assert result.passed, str(result)
    assert result.program.opaque == {}, result.program.source  # nothing left opaque


def test_float32_takes_gradchecks_tolerances_with_nothing_to_tune():
    torch.manual_seed(0)
    result = gt.check(tf.MLP(), randn(5, 4, dtype=torch.float32))
    assert result.passed, str(result)
    assert result.program.dtype == "float32"


def test_a_modules_parameters_are_inputs_and_integer_arguments_constants():
    result = gt.check(module(tf.CNN), randn(2, 2, 8, 8), torch.tensor([1, 3]))
    assert result.program.wrt == ["x", "conv_weight", "conv_bias", "fc_weight", "fc_bias"]
    (labels,) = [v for k, v in result.program.inputs.items() if k not in result.program.wrt]
    assert labels.argmax(1).tolist() == [1, 3]  # the targets one-hot: nll's picks
    without = gt.check(module(tf.CNN), randn(2, 2, 8, 8), torch.tensor([1, 3]), params=False)
    assert without.program.wrt == ["x"] and without.passed


# -- the bugs, named -------------------------------------------------------------------


def test_a_functions_wrong_backward_inside_a_module_is_named_with_its_formula_and_line():
    result = gt.check(module(tf.WithTanh), randn(5, 3))
    assert not result.passed
    top = result.hints[0]
    assert (top.code, top.op, top.mechanism) == ("op-vjp", "TanhNoSquare", "formula")
    assert top.got_rule == "g * (1 - y)"
    assert top.want_rule == "g * (1 - np.tanh(x)**2)"  # its forward is tanh: the right rule
    assert "torch.tanh(x)**2" in top.fix  # in PyTorch spelling
    assert f"traced_functions.py:{line_of(tf.TanhNoSquare.backward, 'def backward')}" in (
        top.message
    )
    assert f"traced_functions.py:{line_of(tf.WithTanh.forward, '.apply(h)')}" in top.message
    # the layer after it is right: its gradients pass
    assert result.inputs["fc2_weight"].passed and not result.inputs["fc1_weight"].passed


def test_a_correct_function_passes_and_its_node_is_opaque():
    result = gt.check(module(tf.WithTanh, tf.Tanh), randn(5, 3))
    assert result.passed, str(result)
    assert list(result.program.opaque) == ["Tanh"]
    assert result.case.reference == "numeric"  # TensorFlow cannot build an opaque node


def test_a_weight_gradient_twice_too_large_is_scaled_at_its_argument():
    result = gt.check(lambda x, w: torch.tanh(tf.LinearDoubledWeight.apply(x, w)).sum(),
                      randn(3, 4), randn(4, 5))  # fmt: skip
    top = result.hints[0]
    assert (top.code, top.op, top.arg, top.mechanism, top.factor) == (
        "op-vjp", "LinearDoubledWeight", 1, "scaled", 2.0
    )  # fmt: skip
    assert result.inputs["x"].passed and not result.inputs["w"].passed
    assert "torch.swapaxes(x, -1, -2) @ g" in top.fix  # matmul's rule, in the user's names


def test_pytorch_issue_4355_a_backward_that_ignores_its_upstream_gradient():
    """ISRLU as reported: `return ctx.nisr ** 3, None` never multiplies by grad_out."""
    result = gt.check(lambda x: tf.ISRLU.apply(x) * 3, randn(4, 5))
    top = result.hints[0]
    assert (top.code, top.op, top.mechanism) == ("op-vjp", "ISRLU", "ignores-upstream")
    # torch.autograd.gradcheck passes it under a cotangent of ones only when the op is the
    # output; under gradcheck's random cotangent it fails wherever it is
    assert gt.check(tf.ISRLU.apply, randn(4, 5)).hints[0].mechanism == "ignores-upstream"


def test_a_detach_that_cuts_the_gradient_is_named_at_its_line():
    result = gt.check(tf.detach_in_normaliser, randn(3, 4), randn(4, 5))
    top = result.hints[0]
    assert (top.code, top.op, top.mechanism) == ("op-vjp", "detach", "zero")
    line = line_of(tf.detach_in_normaliser, "h.detach()")
    assert top.message.startswith("`.detach()` at ")
    assert f"traced_functions.py:{line} (`s = h.detach()" in top.message
    assert "not `t.detach()`" in top.fix and "stop-gradient" in top.fix


def test_a_value_computed_under_no_grad_is_a_cut_named_as_such():
    result = gt.check(tf.centred_under_no_grad, randn(6))
    top = result.hints[0]
    assert (top.op, top.mechanism) == ("no_grad", "zero")
    assert "torch.no_grad()" in top.message


def test_a_cut_that_changes_nothing_is_no_finding():
    result = gt.check(tf.stable_logsumexp, randn(6))
    assert result.passed, str(result)
    assert any("adds nothing to the gradient" in note for note in result.notes)


def test_a_hook_that_changes_the_gradient_is_what_the_trace_cannot_see():
    result = gt.check(tf.doubled_by_hook, randn(4))
    assert not result.passed
    assert result.hints[0].code == "untraced-gradient"
    assert "register_hook" in result.hints[0].message


def test_an_op_no_registry_op_says_is_opaque_checked_by_finite_differences():
    result = gt.check(lambda x: torch.atan(x).sum(), randn(5))
    assert result.passed and list(result.program.opaque) == ["aten_atan"]
    assert any("aten.atan" in note and "finite differences" in note for note in result.notes)


def test_what_the_trace_says_of_itself_is_in_the_report():
    result = gt.check(lambda x: torch.atan(x).sum(), randn(5))
    printed = " ".join(str(result).split())
    assert re.search(r"note: aten.atan at \S*test_torch_check.py:\d+", printed)
    assert "aten.atan" in result.report("json")


def test_several_outputs_are_checked_as_one():
    result = gt.check(lambda x: (x.sin(), tf.TanhNoSquare.apply(x) * 2), randn(3))
    assert not result.passed and result.hints[0].op == "TanhNoSquare"
    assert any("2 tensors" in note for note in result.notes)


def test_a_branch_on_a_value_is_followed_and_said():
    result = gt.check(tf.branches, randn(3))
    assert result.passed
    line = line_of(tf.branches, "if x.sum()")
    assert any(f"traced_functions.py:{line}" in note for note in result.notes)


# -- forward mode and second order -----------------------------------------------------


def test_forward_mode_and_second_order_where_pytorch_does_them():
    result = gt.check(lambda x, w: tf.Swish.apply(x @ w).sum(), randn(3, 4), randn(4, 2),
                      modes=["rev", "fwd"], order=2)  # fmt: skip
    assert result.passed, str(result)
    assert result.case.jvp and result.case.hvp


def test_a_function_without_forward_mode_is_unsupported_in_pytorchs_words():
    result = gt.check(lambda x: tf.Tanh.apply(x).sum(), randn(3), modes=["rev", "fwd"])
    assert result.case.status == "skipped"
    assert "Tanh (a torch.autograd.Function) has no forward-mode rule" in result.case.message
    assert "setup_context" in result.case.message and "None" not in result.case.message
    assert result.inputs["x"].passed  # reverse mode was still checked


def test_second_order_through_once_differentiable_is_unsupported_naming_it():
    result = gt.check(lambda x: tf.OnceTanh.apply(x).sum(), randn(3), order=2)
    assert result.case.status == "skipped"
    assert "OnceTanh's backward is marked @once_differentiable" in result.case.message


# -- what tracing cannot reach ---------------------------------------------------------


def test_random_numbers_are_refused_unless_seeded():
    with pytest.raises(TraceError, match=r"draws random numbers.*traced_functions\.py.*seed="):
        gt.check(tf.dropout_sum, randn(4))
    assert gt.check(tf.dropout_sum, randn(4), seed=3).passed


@pytest.mark.parametrize(
    ("fn", "arg", "says"),
    [
        (lambda x: x.abs().sum(), torch.randn(3, dtype=torch.complex128), "complex"),
        (lambda x: x.sum(), torch.randn(3, 3, dtype=D).to_sparse(), "to_dense"),
        (lambda x: x.sum().item(), torch.randn(3, dtype=D), "not .item()"),
        (lambda x: x.argmax(), torch.randn(3, dtype=D), "no gradient"),
        (lambda x: torch.ones(3, dtype=D), torch.randn(3, dtype=D), "does not depend"),
    ],
    ids=["complex", "sparse", "item", "integer", "constant"],
)
def test_what_tracing_cannot_reach_is_refused_saying_what_instead(fn, arg, says):
    with pytest.raises(TraceError, match=says):
        gt.check(fn, arg)


def test_a_function_that_raises_when_traced_is_refused_at_its_own_line():
    def fn(x):
        return torch.tensor(x.numpy()).sum()  # numpy() of a tensor that requires grad

    with pytest.raises(gradcheck.GradcheckError, match=r"fn raised RuntimeError at .*"
                       r"test_torch_check\.py:\d+ \(`return torch\.tensor\(x\.numpy"):  # fmt: skip
        gt.check(fn, randn(3))


def test_an_in_place_update_of_a_view_is_refused_naming_the_line():
    def fn(x):
        y = x * 1
        y[0] += x[1]
        return y.sum()

    with pytest.raises(TraceError, match=r"test_torch_check\.py:\d+ .*in place"):
        gt.check(fn, randn(3))


# -- results as everywhere else --------------------------------------------------------


def test_assert_gradients_raises_led_by_the_top_hint():
    gt.assert_gradients(module(tf.MLP), randn(5, 4))
    with pytest.raises(AssertionError, match=r"^WithTanh: gradients failed\. op-vjp: "):
        gt.assert_gradients(module(tf.WithTanh), randn(5, 3))


def test_the_reports_of_every_format(tmp_path):
    import json

    result = gt.check(module(tf.WithTanh), randn(5, 3))
    report = json.loads(result.report("json"))
    assert report["cases"][0]["hints"][0]["op"] == "TanhNoSquare"
    assert report["summary"]["root_causes"][0]["hint"]["mechanism"] == "formula"
    assert 'failures="1"' in result.report("junit")
    page = tmp_path / "report.html"
    result.report("html", output=page)
    assert "TanhNoSquare" in page.read_text()
    assert "op-vjp" in str(result) and result.report("rich").endswith("\n")


def test_gradcheck_torch_is_reached_from_the_package():
    assert gradcheck.torch.check is gt.check


# -- saved as a case file ---------------------------------------------------------------


def test_a_saved_check_runs_as_printed_and_says_the_same(tmp_path):
    import shlex
    import subprocess
    import sys

    result = gt.check(module(tf.WithTanh), randn(5, 3))
    ops, case = result.save_case(tmp_path / "with_tanh.yaml")
    assert (ops.name, case.name) == ("with_tanh_ops.py", "with_tanh.yaml")
    command = case.read_text().splitlines()[1].lstrip("# ")
    assert command == f"gradcheck run {case} --ops {ops} --engine {ops}:Engine"
    ran = gradcheck.run(str(case), engine=f"{ops}:Engine", ops=[str(ops)], cache=False)
    (again,) = ran.cases
    mine, theirs = result.hints[0], again.hints[0]
    assert (theirs.code, theirs.op, theirs.mechanism, theirs.got_rule) == (
        mine.code, mine.op, mine.mechanism, mine.got_rule
    )  # fmt: skip
    assert [i.name for i in again.case.inputs if not i.comparison.passed] == [
        name for name, i in result.inputs.items() if not i.passed
    ]
    argv = [sys.executable, "-m", *shlex.split(command)]  # `python -m gradcheck run ...`
    printed = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert printed.returncode == 1, printed.stderr
    assert "TanhNoSquare's VJP for argument 0" in printed.stdout


def test_a_saved_check_with_nothing_opaque_needs_no_ops_file(tmp_path):
    result = gt.check(module(tf.MLP), randn(5, 4), seed=7)
    (case,) = result.save_case(tmp_path / "mlp.yaml")
    text = case.read_text()
    assert "--engine torch" in text.splitlines()[1] and "seed: 7" in text
    ran = gradcheck.run(str(case), engine="torch", cache=False)
    assert ran.passed and ran.cases[0].case.reference == "tensorflow"


def test_a_saved_cut_keeps_its_cut(tmp_path):
    result = gt.check(tf.detach_in_normaliser, randn(3, 4), randn(4, 5))
    ops, case = result.save_case(tmp_path / "detach.yaml")
    assert "stops=('detach',)" in ops.read_text()
    ran = gradcheck.run(str(case), engine=f"{ops}:Engine", ops=[str(ops)], cache=False)
    top = ran.cases[0].hints[0]
    assert (top.op, top.mechanism) == ("detach", "zero")


# -- PyTorch's own modules, as they are written ----------------------------------------

MODULES = {
    "lstm": (lambda: torch.nn.LSTM(3, 4, batch_first=True), lambda m, x: m(x)[0], (2, 5, 3)),
    "gru": (lambda: torch.nn.GRU(3, 4), lambda m, x: m(x)[0], (5, 2, 3)),
    "attention": (
        lambda: torch.nn.MultiheadAttention(4, 2, batch_first=True),
        lambda m, x: m(x, x, x)[0],
        (2, 3, 4),
    ),
    "transformer": (
        lambda: torch.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True),
        lambda m, x: m(x),
        (2, 3, 4),
    ),
    "cosine": (lambda: torch.nn.CosineSimilarity(), lambda m, x: m(x, 2 * x + 1), (3, 4)),
    "group-norm": (lambda: torch.nn.GroupNorm(2, 4), lambda m, x: m(x), (2, 4, 3, 3)),
}


@pytest.mark.parametrize("name", MODULES)
def test_pytorchs_own_modules_pass_however_they_are_written(name):
    """In-place updates of split gates (LSTM, GRU), a clamp written in place under no_grad
    (cosine similarity's), fused attention with no dropout: traced as torch runs them."""
    make, call, shape = MODULES[name]
    torch.manual_seed(0)
    m = make().double()
    result = gt.check(lambda x: call(m, x), randn(*shape))
    assert result.passed, str(result)


def test_an_in_place_write_under_no_grad_keeps_the_gradient_autograd_keeps():
    def clipped(x, w):
        with torch.no_grad():
            w.clamp_(-0.5, 0.5)  # autograd never sees it: w's gradient is as if unclipped
        return (x @ w).sum()

    w = randn(4, 2)
    result = gt.check(clipped, randn(3, 4), w)
    assert result.hints[0].op == "no_grad"  # the derivative of the value is not autograd's
    assert not result.inputs["w"].passed and result.inputs["x"].passed
    assert w.abs().max() > 0.5  # the caller's tensors are never written
