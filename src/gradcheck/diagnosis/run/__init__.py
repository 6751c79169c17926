"""The run as a whole: root causes across cases (`root_causes.py`), the per-op report
card (`report_card.py`), how hints are ranked and folded (`ranking.py`), and
`--diagnose=first` (`brief.py`).
"""
