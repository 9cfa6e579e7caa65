"""Request traces for servesim: schema, loaders, synthetic workloads, workload specs, stats.

    from traces import load_trace, build_workload, trace_stats
    trace = load_trace("AzureLLMInferenceTrace_conv.csv")          # format auto-detected
    trace.df  # request_id, arrival_s, prompt_tokens, output_tokens, lane, priority, tenant,
              # prefix_hashes (see traces.schema)

Bad input raises traces.errors.TraceError (an InputError / ValueError) with a one-line message.
"""

from traces.errors import InputError, TraceError, TraceWarning
from traces.loaders import FORMATS, detect_format, load_trace, write_trace
from traces.schema import COLUMNS, Trace, make_trace
from traces.spec import ArrivalSpec, LengthSpec, PrefixSpec, WorkloadSpec
from traces.stats import format_stats, trace_stats
from traces.synthetic import mix
from traces.workload import build_workload

__all__ = [
    "COLUMNS",
    "FORMATS",
    "ArrivalSpec",
    "InputError",
    "LengthSpec",
    "PrefixSpec",
    "Trace",
    "TraceError",
    "TraceWarning",
    "WorkloadSpec",
    "build_workload",
    "detect_format",
    "format_stats",
    "load_trace",
    "make_trace",
    "mix",
    "trace_stats",
    "write_trace",
]
