"""Known bugs: the fault catalogue (`catalogue.py`, its entries `rules.py`), the builtin
engine with one fault planted (`planted.py`), and the faults run on a whole case
(`fingerprints.py`).
"""
