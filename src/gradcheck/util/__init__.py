"""Small utilities every layer may use: writing files atomically, signals during a run,
gradcheck's own stderr, NumPy on first use, importing a user's file, the shared limits.
"""
