"""The three steps of checking one case, each run where it must run.

* `engine_step.py`: the engine builds the expression and gives its forward value and
  gradients, and the JVPs and second order the case asks for (`modes.py`). It runs
  where the engine runs: in a worker process, or in gradcheck's own.
* `verdict.py` (and `modes.mode_verdict` for the JVPs and second order): the engine's
  numbers against the reference's, under the case's tolerance. It runs in gradcheck's
  own process, always: nothing an engine does decides it.
* `diagnosis_step.py`: why a failing case fails. Diagnosis probes the engine
  (localisation runs it again on one-op expressions), so it runs where the engine runs,
  given the reference and the verdict.

Every step's result is plain data (`results`, `EngineRun`, `EngineOutcome`), so it can
cross from a worker process to gradcheck's.
"""
