"""The runtime format of a fitted cost profile: what the simulator reads.

``model_file`` (the profile schema, its loader and the shipped profiles), ``grid`` (the
log-grid tables and their interpolation), ``work`` (FLOPs and bytes of each operation and
its roofline time), ``gemms`` (which GEMMs a model has, element sizes). ``calibrate``
writes profiles in this format; nothing here imports ``calibrate``.
"""
