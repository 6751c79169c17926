"""Case files: discovered on disk, loaded into validated `Case`s, described by a schema."""

from .loader import Collected, collect, discover, load_file, load_paths
from .model import Case, InvalidCase, Tolerance
from .schema import case_file_schema

__all__ = [
    "Case",
    "Collected",
    "InvalidCase",
    "Tolerance",
    "case_file_schema",
    "collect",
    "discover",
    "load_file",
    "load_paths",
]
