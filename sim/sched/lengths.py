"""Length rules: which requests are served, and how many output tokens each may generate.

vLLM 0.32 applies two rules before a request reaches the scheduler:

* the input processor rejects a prompt that leaves no room for one output token:
  prompt >= max_model_len (``vllm/v1/engine/input_processor.py:557``,
  ``_validate_prompt_len``: lines 574 and 593; the OpenAI server already refuses
  prompt > max_model_len in ``get_max_tokens``,
  ``vllm/entrypoints/serve/utils/api_utils.py:183``);
* the OpenAI server shortens max_tokens to what fits:
  ``min(max_tokens, max_model_len - prompt)`` (``api_utils.py:188-205``), so a
  request whose prompt + max_tokens exceeds max_model_len is served, shorter.

``engine.strict_max_model_len`` keeps servesim's older rule instead: reject every
request whose prompt + output exceeds max_model_len. Both run once, on the
request table, before the engine starts (:func:`serve`); the scheduler then
rejects by :func:`rejected`, which agrees with either rule on served lengths.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from sim.engine.requests import RequestSpecs


def rejected(prompt, output, max_model_len: int) -> np.ndarray:
    """Requests refused at arrival: no room for one output token, or (only possible when
    lengths were not shortened) prompt + output > max_model_len."""
    prompt, output = np.asarray(prompt), np.asarray(output)
    return (prompt >= max_model_len) | (prompt + output > max_model_len)


def served_output(prompt: np.ndarray, output: np.ndarray, max_model_len: int,
                  strict: bool) -> np.ndarray:
    """Output tokens each request generates: max_tokens shortened to fit (vLLM's server), or
    unchanged with ``strict`` (over-long requests are then rejected instead)."""
    if strict:
        return output
    room = max_model_len - prompt
    return np.where(room > 0, np.minimum(output, room), output)  # room <= 0: rejected


def serve(specs: RequestSpecs, max_model_len: int, strict: bool) -> tuple[RequestSpecs, int]:
    """The request table as the engine sees it, and how many requests had max_tokens
    shortened to fit max_model_len."""
    served = served_output(specs.prompt_tokens, specs.output_tokens, max_model_len, strict)
    shortened = served < specs.output_tokens
    if not shortened.any():
        return specs, 0
    served = served.astype(np.int64)
    served.flags.writeable = False
    return replace(specs, output_tokens=served), int(shortened.sum())
