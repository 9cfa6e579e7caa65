"""Calibration harness: time kernels and GEMMs, fit the step-time model, report its error.

    shapes   which shapes to time (from the model, tp and engine knobs)
    timing   CUDA events / CPU clock, warm-up dropped, median of repeats
    ops      the timed operations (Triton kernels + torch GEMMs; torch ops on CPU)
    profile  the resumable profile parquet
    fit      per-operation tables with a seeded held-out split (grid: the table maths)
    validate error per operation and shape region
    aiconfigurator / steps   imports: NVIDIA's measured tables, engine step logs
    model_file               the versioned YAML the `fitted` cost model reads
    cli                      `servesim calibrate ...`

Importing the package imports nothing heavy; torch is loaded only by ``ops``/``timing``.
See calibrate/README.md.
"""
