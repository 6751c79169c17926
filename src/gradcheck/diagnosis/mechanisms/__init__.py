"""What is wrong with a rule: the probes (`probes.py`), value and shape patterns
(`patterns.py`), regions (`regions.py`), conventions at kinks (`conventions.py`,
`kinks.py`), dtypes (`dtypes.py`), errors (`errors.py`), and what the probes found
(`findings.py`).
"""
