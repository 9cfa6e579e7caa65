"""Write chat-15min.csv: a small chat trace every servesim user has (no ../shared needed).

A synthetic stand-in with the two properties of the Azure LLM inference trace 2023 (conv)
that capacity planning depends on, generated here (no rows are copied from it):

* lengths: the embedded Azure-conversation quantile tables (traces.length_tables);
* arrivals: uneven minutes. Each minute's rate is the mean times a lognormal factor
  (sigma 0.25, the conv trace's 60 s count CV) drifting as an AR(1) process (rho 0.6),
  arrivals within a minute Poisson. Its busiest whole minute runs ~1.5x its mean, as in
  the conv trace (8.45 vs 5.53 req/s).

Run from the repository root: python scenarios/traces/make_chat_trace.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from traces.lengths import azure_conv_like

MEAN_RATE = 5.53  # req/s, the conv trace's mean
MINUTES = 15
SIGMA, RHO = 0.25, 0.6
SEED = 2034  # of seeds 2020-2039, one whose busiest minute is ~1.5x its mean (1.54)
OUT = Path(__file__).with_name("chat-15min.csv")


def minute_rates(rng: np.random.Generator) -> np.ndarray:
    z, out = 0.0, []
    for _ in range(MINUTES):
        z = RHO * z + np.sqrt(1 - RHO**2) * rng.standard_normal()
        out.append(MEAN_RATE * np.exp(SIGMA * z - SIGMA**2 / 2))
    return np.array(out)


def main() -> None:
    rng = np.random.default_rng(SEED)
    times = []
    for m, rate in enumerate(minute_rates(rng)):
        n = rng.poisson(rate * 60)
        times.append(np.sort(m * 60 + rng.uniform(0, 60, n)))
    t = np.concatenate(times)
    t -= t[0]
    lengths = azure_conv_like(len(t), rng)
    rows = [f"{a:.3f},{p},{o}" for a, p, o in zip(t, lengths.prompt, lengths.output)]
    OUT.write_text("arrival_s,prompt_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    print(f"{OUT}: {len(t)} requests over {t[-1]:.0f} s")


if __name__ == "__main__":
    main()
