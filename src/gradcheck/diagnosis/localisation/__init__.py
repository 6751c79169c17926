"""Where it goes wrong: each op node checked alone (`localise.py`), every node's gradient,
the engine's and the right one (`adjoints.py`), and the backward driver (`driver.py`).
"""
