"""Diagnosis of the other modes: forward mode's JVPs (`forward.py`) and second order
(`second_order.py`).
"""
