"""The ready adapters, loaded by name (`--engine torch | jax | autograd | tensorflow`):
each implements the adapter protocol with its framework's own functions.
"""
