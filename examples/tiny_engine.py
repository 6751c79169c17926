"""The complete small engine of the README: mul, exp and sum, reverse mode on NumPy."""

import numpy as np


def unbroadcast(g, shape):
    """Sum a broadcast gradient back to `shape`: extra leading axes, then size-1 axes."""
    g = g.sum(axis=tuple(range(g.ndim - len(shape))))
    return g.sum(axis=tuple(i for i, d in enumerate(shape) if d == 1), keepdims=True)


class Var:
    def __init__(self, value, parents=()):
        self.value, self.parents = np.asarray(value), parents  # parents: (node, vjp) pairs


class Engine:
    name = "tiny"

    def leaf(self, name, value):  # a differentiable input (np.ndarray)
        return Var(value)

    def constant(self, value):  # optional: literals, and inputs not in wrt
        return Var(value)

    def mul(self, a, b):  # one method per op, named as in `gradcheck ops`
        return Var(a.value * b.value, [(a, lambda g: g * b.value), (b, lambda g: g * a.value)])

    def exp(self, x):
        out = np.exp(x.value)
        return Var(out, [(x, lambda g: g * out)])

    def sum(self, x, axis=None, keepdims=False):  # attributes arrive as keywords
        axis = tuple(axis) if isinstance(axis, list) else axis  # axis=[0, 1] comes as a list

        def vjp(g):
            if not keepdims and axis is not None:
                g = np.expand_dims(g, axis)
            return np.broadcast_to(g, x.value.shape)

        return Var(x.value.sum(axis=axis, keepdims=keepdims), [(x, vjp)])

    def value(self, node):  # the forward value: anything np.asarray accepts
        return node.value

    def grad(self, output, wrt, cotangent):
        """One array per node in wrt: the gradient of sum(output * cotangent)."""
        order, seen, stack = [], set(), [(output, False)]
        while stack:  # iterative topological order: no recursion limit
            node, parents_done = stack.pop()
            if parents_done:
                order.append(node)
            elif id(node) not in seen:
                seen.add(id(node))
                stack += [(node, True)] + [(p, False) for p, _ in node.parents]
        grads = {id(output): cotangent}
        for node in reversed(order):  # each node after every consumer has contributed
            g = grads.get(id(node))
            for parent, vjp in node.parents if g is not None else ():
                share = unbroadcast(vjp(g), parent.value.shape)
                grads[id(parent)] = grads.get(id(parent), 0) + share  # accumulate at fan-out
        return [grads.get(id(n), np.zeros_like(n.value)) for n in wrt]
