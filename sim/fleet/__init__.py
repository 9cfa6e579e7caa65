"""Fleets: several replicas in one SimPy environment, behind routers, in pools.

    config.py    the ``cluster`` section (pools, routers, disaggregation)
    plan.py      the scenario resolved per pool
    routers/     routing policies (registry, one file each)
    source.py    the arrival source a router pushes requests into
    replica.py   one replica: the single-run engine, KV, scheduler, cost
    cluster.py   the run: arrivals -> routers -> replicas (-> KV transfer -> decode pool)
    disagg.py    the decode side of a prefill/decode split (transferred prompts)
    views.py     per-replica and fleet views of the results
    summary.py   per-replica, per-pool and fleet summaries
    run.py       simulate + summarize + steps.jsonl (steps and routing decisions)
    sizing.py    the fewest replicas that hold the SLOs at a target rate

A replica does not know it is in a fleet: it is the same engine as a single run (the
fast core's, or the general ``Engine``: replica.py), reading arrivals from a source the
router fills.
"""
