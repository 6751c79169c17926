"""The case-file JSON Schema: valid itself, and in step with what the loader accepts."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from gradcheck.cases import Case, InvalidCase, case_file_schema, discover, load_file
from gradcheck.cases.loader import CASE_KEYS, DEFAULT_KEYS, SPEC_KEYS, read_yaml

ROOT = Path(__file__).parents[1]
GOOD = ROOT / "tests" / "data" / "loader" / "good.yaml"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = case_file_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(validator: jsonschema.Draft202012Validator, text: str) -> list[str]:
    return [e.message for e in validator.iter_errors(read_yaml(text))]


def test_schema_is_draft_2020_12():
    schema = case_file_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_schema_names_exactly_the_loader_s_keys():
    schema = case_file_schema()
    assert set(schema["properties"]) == {"defaults", "cases"}
    assert set(schema["$defs"]["case"]["properties"]) == set(CASE_KEYS)
    assert set(schema["properties"]["defaults"]["properties"]) == set(DEFAULT_KEYS)
    assert set(schema["$defs"]["input_spec"]["properties"]) == set(SPEC_KEYS)


@pytest.mark.parametrize(
    "path",
    [GOOD, *discover([ROOT / "cases"])],
    ids=lambda path: path.name,
)
def test_good_files_validate(validator, path):
    assert errors(validator, path.read_text()) == []


GOOD_SNIPPETS = {
    "minimal": "cases:\n  - {name: a, expr: x, inputs: {x: 1}}\n",
    "spec with a range": "cases:\n  - {name: a, expr: x, inputs: {x: {shape: [2], "
    "init: uniform, low: -2, high: 2}}}\n",
    "literal cotangent": "cases:\n  - {name: a, expr: x, inputs: {x: [1, 2]}, cotangent: [3, 4]}\n",
    "integer values": "cases:\n  - {name: a, expr: 'take(x, i)', inputs: {x: [1.0, 2.0], "
    "i: {values: [1, 0, 1], dtype: int64}}}\n",
    "integer spec with a range": "cases:\n  - {name: a, expr: 'take(x, i)', inputs: "
    "{x: {shape: [3]}, i: {shape: [4], low: 0, high: 2, dtype: int32}}}\n",
}

# Each is wrong in a way a schema can say; the loader must refuse it too.
BAD_SNIPPETS = {
    "unknown case key": "cases:\n  - {name: a, expr: x, inputs: {x: 1}, tolerence: {}}\n",
    "bad dtype": "cases:\n  - {name: a, expr: x, inputs: {x: 1}, dtype: float8}\n",
    "negative tolerance": "cases:\n  - {name: a, expr: x, inputs: {x: 1}, tolerance: {rtol: -1}}\n",
    "bad name": "cases:\n  - {name: 'a b', expr: x, inputs: {x: 1}}\n",
    "no expr": "cases:\n  - {name: a, inputs: {x: 1}}\n",
    "bad cotangent": "cases:\n  - {name: a, expr: x, inputs: {x: 1}, cotangent: zeros}\n",
    "negative seed": "cases:\n  - {name: a, expr: x, inputs: {x: 1}, seed: -1}\n",
    "unknown init": "cases:\n  - {name: a, expr: x, inputs: {x: {shape: [2], init: gauss}}}\n",
    "spec without shape": "cases:\n  - {name: a, expr: x, inputs: {x: {init: normal}}}\n",
    "range on normal": "cases:\n  - {name: a, expr: x, inputs: {x: {shape: [2], high: 1}}}\n",
    "keyword input": "cases:\n  - {name: a, expr: x, inputs: {x: 1, 'if': 2}}\n",
    "op-named input": "cases:\n  - {name: a, expr: x, inputs: {x: 1, sum: 2}}\n",
    "non-string tag": "cases:\n  - {name: a, expr: x, inputs: {x: 1}, tags: [1]}\n",
    "case-only key in defaults": "defaults: {expr: x}\ncases: []\n",
    "unknown top-level key": "cases: []\nversion: 2\n",
    "no cases": "defaults: {dtype: float32}\n",
    "values without a dtype": "cases:\n  - {name: a, expr: 'take(x, i)', inputs: "
    "{x: [1.0, 2.0], i: {values: [1]}}}\n",
    "float input dtype": "cases:\n  - {name: a, expr: x, inputs: {x: {shape: [2], "
    "dtype: float32}}}\n",
}


@pytest.mark.parametrize("text", GOOD_SNIPPETS.values(), ids=GOOD_SNIPPETS)
def test_schema_and_loader_both_accept(validator, tmp_path, text):
    assert errors(validator, text) == []
    path = tmp_path / "good.yaml"
    path.write_text(text)
    items = load_file(path)
    assert items and all(isinstance(item, Case) for item in items), items


@pytest.mark.parametrize("text", BAD_SNIPPETS.values(), ids=BAD_SNIPPETS)
def test_schema_and_loader_both_refuse(validator, tmp_path, text):
    assert errors(validator, text) != []
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert any(isinstance(item, InvalidCase) for item in load_file(path))
