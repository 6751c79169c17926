"""Checking a PyTorch or JAX function with no case file (`gradcheck.torch.check`,
`gradcheck.jax.check`): the function is traced into gradcheck's own expression graph and
checked as an ordinary case.

The pieces, in the order a check goes through them:

* `torch_trace` (ATen ops under a ``TorchDispatchMode``; a custom ``autograd.Function``
  kept whole) and `jax_trace` (``jax.make_jaxpr``'s equations, ``jit`` inlined; a
  ``custom_vjp`` kept whole) record what the function does; `torch_build` and
  `jax_build` write it out as a `program.Program`, an ordinary expression with the
  user's lines as comments, through the tables that map the framework's ops onto the
  registry (`torch_aten` with `aten_*`, `jax_primitives` with `lax_*`, what both share
  in `tables`);
* `opaque`: what maps onto nothing (a custom gradient, an op without an equivalent) is a
  user op of its own, checked by finite differences of its forward (`torch_opaque`,
  `jax_opaque`: what such a node calls); a cut (``.detach()``, ``torch.no_grad()``,
  ``stop_gradient``) is a stop op;
* `checking`: the program is a case, run by the runner with an engine that replays it
  through the framework (the stock adapter plus the opaque ops' methods), held to the
  function's own value and gradient; `explain` points the hints at the user's code;
* `results.TracedCheck` is what comes back; `saving` writes it as a case file, with an
  ops file for its opaque nodes and cuts (`torch_saved`, `jax_saved`).
"""
