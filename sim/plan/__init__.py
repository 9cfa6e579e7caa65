"""Sweeps and capacity search: many simulations of one scenario, above ``sim.pipeline``.

    grid.py       configurations x loads x seeds -> points (stable ids)
    point.py      one point: scenario + overrides -> simulate -> flat record
    executors/    where points run: local (process pool) or ray
    store.py      the output folder: a file per point, points.parquet, --resume
    sweep.py      run a plan's points
    capacity.py   the highest sustainable load per configuration (bracket + bisect)
    frontier.py   the frontier table, best config, per GPU, cost per million tokens
    emit.py       the chosen config as `vllm serve` flags and chosen.yaml
    peaks.py      mean vs busiest-minute rate; warn when Poisson stands in for a trace
    sustain.py    the one stability predicate
"""
