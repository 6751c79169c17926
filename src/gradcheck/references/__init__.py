"""What an engine is judged against: TensorFlow (`tensorflow.py`), finite differences
(`numeric.py`, `numeric_modes.py`), either computed (`computed.py`), and the references
kept between runs (`cache.py`, its entries `entries.py`) with the lock a reviewer reads
(`lock.py`, its format `lockfile.py`).
"""
