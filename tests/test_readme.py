"""The README's examples are files the suite runs: examples/tiny_engine.py, and the user-op
declaration examples/custom_op/softplus_ops.py."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_adapter_example_is_the_tested_file():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(import numpy as np\n.*?)```", readme, re.S)
    adapters = [block for block in blocks if "def grad(self, output, wrt, cotangent)" in block]
    assert len(adapters) == 1, "the README lost its adapter example"
    source = (ROOT / "examples" / "tiny_engine.py").read_text()
    body = source.split('"""', 2)[2].lstrip("\n")  # the file less its docstring
    assert adapters[0] == body


def test_readme_user_op_example_is_the_tested_file():
    readme = (ROOT / "README.md").read_text()
    source = (ROOT / "examples" / "custom_op" / "softplus_ops.py").read_text()
    body = source.split('"""', 2)[2].lstrip("\n")
    assert f"```python\n{body}```" in readme
