"""Where the optional public traces live: ``../shared/traces`` beside the repository, or
``$SERVESIM_SHARED_TRACES``. Tests that read them skip cleanly when they are absent."""

from __future__ import annotations

import os
from pathlib import Path

TRACES = Path(os.environ.get("SERVESIM_SHARED_TRACES",
                             Path(__file__).resolve().parents[2] / "shared" / "traces"))
AZURE_CONV = TRACES / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv"
AZURE_CODE = TRACES / "azure_llm_2023" / "AzureLLMInferenceTrace_code.csv"
MOONCAKE = TRACES / "mooncake_fast25" / "conversation_trace.jsonl"
SHAREGPT = TRACES / "sarathi_sharegpt" / "sharegpt_8k_filtered_stats_llama2_tokenizer.csv"
ARXIV = (TRACES / "vidur_arxiv_summarization"
         / "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv")
