"""Known bugs: the fault catalogue (`catalogue/`, a module per op family; what an entry
is, `rules.py`), the builtin engine with one fault planted (`planted.py`), and the faults
run on a whole case (`fingerprints.py`).
"""
