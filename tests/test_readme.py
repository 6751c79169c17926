"""The README's adapter example is examples/tiny_engine.py, which the suite runs."""

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
