"""gradcheck: check any autodiff engine's gradients against TensorFlow and explain mismatches."""

__version__ = "0.1.0"
