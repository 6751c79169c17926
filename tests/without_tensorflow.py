"""Run the command line in a fresh interpreter and say whether TensorFlow got imported.

`WRAPPER` runs ``gradcheck ARGS...`` (``python -c WRAPPER ARGS...``) and ends stderr with
``tensorflow imported: True|False``; `NO_TENSORFLOW` put before it hides TensorFlow from
that interpreter altogether (not importable, not in the package metadata), as on a
machine where only ``pip install gradcheck`` ran.
"""

WRAPPER = """
import sys
from gradcheck.cli import main
sys.argv = ["gradcheck", *sys.argv[1:]]
try:
    main()
    code = 0
except SystemExit as e:
    code = e.code
sys.stderr.write(f"\\ntensorflow imported: {'tensorflow' in sys.modules}\\n")
sys.exit(code)
"""

NO_TENSORFLOW = """
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
import gradcheck.references.cache
gradcheck.references.cache.installed_version = lambda: None
"""
