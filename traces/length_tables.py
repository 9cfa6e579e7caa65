"""Embedded quantile tables of real token-length distributions (no external file needed).

Each table gives the token count at the percentiles in PERCENTILES (numpy linear percentiles of
the source file, rounded to integers). Sampling interpolates the quantile function linearly
between the knots, so p50 / p90 / p99 / max of a large sample match the source.

Sources (computed from the files described in /work/shared/traces/README.md):
- SHAREGPT_*: sharegpt_8k_filtered_stats_llama2_tokenizer.csv from microsoft/sarathi-serve
  (branch niyama_asplos2026, commit 72339db5b120; Apache-2.0), 30,731 rows, Llama-2 tokenizer.
  README: input p50/p90/p99/max 1730/5696/7434/8141, output 415/834/998/1024.
- AZURE_CONV_*: AzureLLMInferenceTrace_conv.csv from Azure/AzurePublicDataset (CC-BY 4.0; Patel
  et al., "Splitwise", ISCA 2024), 19,366 rows. README: input p50/p90/p99 1020/2734/4142 (max
  14050), output 129/424/601 (max 1000).
Prompt and output lengths are sampled independently: their rank correlation in both sources is
small (Spearman 0.05 for ShareGPT, 0.07 for Azure conv).
"""

from __future__ import annotations

# fmt: off
PERCENTILES = (
    0, 0.1, 0.5, 1, 2.5, 5, 7.5, 10, 15, 20, 25, 30, 35, 40, 45, 50,
    55, 60, 65, 70, 75, 80, 85, 90, 92.5, 95, 97.5, 99, 99.5, 99.9, 100,
)
SHAREGPT_PROMPT = (
    1, 5, 9, 12, 18, 29, 46, 74, 180, 382, 580, 777, 973, 1203, 1457, 1730,
    2060, 2401, 2799, 3235, 3734, 4278, 4918, 5696, 6104, 6563, 7056, 7434, 7622, 7854, 8141,
)
SHAREGPT_OUTPUT = (
    2, 2, 3, 6, 24, 44, 64, 84, 130, 181, 228, 271, 312, 346, 381, 415,
    453, 493, 534, 581, 628, 683, 754, 834, 876, 920, 965, 998, 1009, 1021, 1024,
)
AZURE_CONV_PROMPT = (
    2, 8, 17, 29, 120, 181, 200, 207, 372, 387, 396, 403, 414, 703, 984, 1020,
    1045, 1071, 1097, 1130, 1189, 1315, 1876, 2734, 4075, 4083, 4092, 4142, 4831, 6179, 14050,
)
AZURE_CONV_OUTPUT = (
    7, 12, 14, 16, 28, 41, 48, 54, 67, 77, 85, 91, 96, 103, 113, 129,
    151, 177, 217, 384, 395, 400, 411, 424, 430, 451, 522, 601, 643, 954, 1000,
)
# fmt: on
