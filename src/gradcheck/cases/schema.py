"""The JSON Schema (draft 2020-12) of case files, for editors, CI linters and `gradcheck schema`.

It is built from the loader's own tables, so the two cannot drift apart. The loader
checks more than a schema can say (ragged arrays, shapes, names the expression must
define, the expression itself), so every file it accepts validates, not conversely.
"""

from __future__ import annotations

import keyword
from typing import Any

from ..ops import all_ops
from .case_reader import IDENTIFIER_PATTERN, NAME_PATTERN
from .dtypes import DTYPES, INTEGER_DTYPES
from .inputs import INITS
from .loader import DEFAULT_KEYS
from .model import MODES
from .values import COTANGENTS, MAX_RANK, REFERENCES, TOLERANCE_KEYS


def case_file_schema() -> dict[str, Any]:
    """A JSON Schema of case files, as a fresh dict the caller may change."""
    array = {"$ref": "#/$defs/array"}
    seed = {"type": "integer", "minimum": 0}
    case = {
        "name": {
            "type": "string",
            "pattern": f"^{NAME_PATTERN}$",
            "description": "Unique within the file.",
        },
        "description": {"type": "string"},
        "expr": {
            "type": "string",
            "description": "An expression, or `name = expression` lines ending with the output.",
        },
        "inputs": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {
                "pattern": f"^{IDENTIFIER_PATTERN}$",
                "not": {"enum": sorted({*keyword.kwlist, *(op.name for op in all_ops())})},
            },
            "additionalProperties": {
                "anyOf": [
                    array,
                    {"$ref": "#/$defs/input_spec"},
                    {"$ref": "#/$defs/integer_values"},
                ]
            },
        },
        "wrt": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "uniqueItems": True,
            "description": "Inputs or bindings to differentiate; every input by default.",
        },
        "dtype": {"enum": list(DTYPES), "default": "float64"},
        "cotangent": {
            "anyOf": [{"enum": list(COTANGENTS)}, array],
            "default": "random",
            "description": "random (seeded normal; ones where the case pins expect), ones "
            "(the gradient of the output's sum) or an array of the output's shape.",
        },
        "tolerance": {
            "type": "object",
            "properties": {key: {"type": "number", "minimum": 0} for key in TOLERANCE_KEYS},
            "additionalProperties": False,
            "description": "Pass iff |got - want| <= atol + rtol * |want|; default per dtype.",
        },
        "seed": {**seed, "description": "Derived from the case name by default."},
        "expect": {
            "type": "object",
            "additionalProperties": array,
            "description": "Pinned reference gradients, by wrt name.",
        },
        "tags": {"type": "array", "items": {"type": "string"}},
        "reference": {
            "enum": list(REFERENCES),
            "description": "tensorflow, numeric (finite differences) or both; "
            "the run's --reference by default.",
        },
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Seconds the engine may take on the case (--timeout; default 60).",
        },
        "modes": {
            "type": "array",
            "items": {"enum": list(MODES)},
            "minItems": 1,
            "uniqueItems": True,
            "description": "rev (gradients, reverse mode) and/or fwd (JVPs, forward mode); "
            "the run's --modes, by default [rev].",
        },
        "order": {
            "enum": [1, 2],
            "description": "2: also the gradient of sum(grad * v), a Hessian-vector product; "
            "the run's --order, by default 1.",
        },
    }
    input_spec = {
        "type": "object",
        "properties": {
            "shape": {
                "type": "array",
                "items": {"type": "integer", "minimum": 0},
                "maxItems": MAX_RANK,
            },
            "init": {"enum": list(INITS), "default": "normal"},
            "low": {"type": "number"},
            "high": {"type": "number"},
            "seed": {**seed, "description": "Overrides the case's seed for this input."},
            "dtype": {
                "enum": list(INTEGER_DTYPES),
                "description": "An integer input (indices, labels): init integers, never "
                "differentiated. Float inputs take the case's dtype.",
            },
        },
        "required": ["shape"],
        "additionalProperties": False,
        # init normal (the default, but for an integer input) is mean 0, std 1: no range.
        "if": {"properties": {"init": {"const": "normal"}}, "not": {"required": ["dtype"]}},
        "then": {"properties": {"low": False, "high": False}},
    }
    defaults = {key: case[key] for key in DEFAULT_KEYS}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "gradcheck case file",
        "type": "object",
        "properties": {
            "defaults": {"type": "object", "properties": defaults, "additionalProperties": False},
            "cases": {"type": "array", "items": {"$ref": "#/$defs/case"}},
        },
        "required": ["cases"],
        "additionalProperties": False,
        "$defs": {
            "case": {
                "type": "object",
                "properties": case,
                "required": ["name", "expr", "inputs"],
                "additionalProperties": False,
            },
            "input_spec": input_spec,
            "integer_values": {
                "type": "object",
                "description": "An integer input's values (indices, labels), e.g. "
                "{values: [0, 2, 2], dtype: int64}.",
                "properties": {"values": array, "dtype": {"enum": list(INTEGER_DTYPES)}},
                "required": ["values", "dtype"],
                "additionalProperties": False,
            },
            "array": {
                "description": "A number or a rectangular nested list of numbers.",
                "anyOf": [{"type": "number"}, {"type": "array", "items": array}],
            },
        },
    }
