"""Speculative decoding: vLLM's ``--speculative-config`` and servesim's acceptance process.

vLLM's keys (``method``, ``num_speculative_tokens``, ``model``) say what the server runs and
are emitted as given; ``acceptance_rates`` / ``acceptance_histogram`` and
``acceptance_seed`` are servesim's: they stand for what the drafter and the target model
agree on, which a simulator without token ids cannot know (a measured figure: vLLM logs
``Mean acceptance length`` and a per-position ``Accepted: ...`` line with
``--speculative-config`` on; EAGLE-3 papers publish per-position rates).

Lookahead KV slots (vllm/config/vllm.py:615-642 ``num_lookahead_tokens``): the drafter of
the EAGLE family (``eagle``, ``eagle3``, ``mtp``) and a draft model write KV one position
past the verified ones, so every allocation reserves K extra slots; n-gram reserves none.

Async scheduling (vllm/config/vllm.py:1553-1644): vLLM 0.32 runs it with every method here
but ``ngram``, whose prompt lookup reads the sampled tokens on the host after the step's
bookkeeping: unset, it is turned off; asked for, vLLM refuses to start. ``ngram_gpu`` (the
same lookup on the GPU) runs async.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from sim.config.limits import MAX_SEED, why
from traces.validated import Validated

MAX_SPEC_TOKENS = 16  # vLLM accepts more; no published deployment drafts more than ~10
EAGLE_FAMILY = ("eagle", "eagle3", "mtp")  # vllm/config/speculative.py:1944 use_eagle
NGRAM = ("ngram", "ngram_gpu")  # prompt lookup: no weights, no KV, no lookahead
METHODS = (*EAGLE_FAMILY, *NGRAM, "draft_model")
# methods vLLM 0.32 runs with async scheduling (on by default; vllm/config/vllm.py:1563-1569)
ASYNC_METHODS = (*EAGLE_FAMILY, "ngram_gpu", "draft_model")


class SpeculativeConfig(Validated):
    """vLLM's --speculative-config (its keys) plus the acceptance process servesim samples."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    method: Literal["eagle", "eagle3", "mtp", "ngram", "ngram_gpu", "draft_model"] = Field(
        description="vLLM's method: eagle / eagle3 (a one-layer head on the target's hidden "
        "states), mtp (the model's own multi-token-prediction layer, DeepSeek-V3, Qwen3-Next), "
        "ngram (prompt lookup on the host, no KV; vLLM runs it without async scheduling), "
        "ngram_gpu (the same lookup on the GPU, async-capable) or draft_model (a smaller model "
        "of the same tokenizer, given by `model`).")
    num_speculative_tokens: int = Field(
        ge=1, le=MAX_SPEC_TOKENS, json_schema_extra=why(
            "acceptance falls off long before; vLLM's examples use 1-7", "tokens"),
        description="Draft tokens proposed per decoding request per step (K; tokens). A "
        "decoding request is scheduled 1 + K tokens: its last token and the drafts to verify.")
    model: str | None = Field(
        None, description="The drafter's weights (vLLM's `model` key): a Hugging Face repo "
        "for eagle/eagle3 heads, or for draft_model a servesim catalog model priced as the "
        "drafter (`servesim catalog`). Emitted as given; unused for ngram, ngram_gpu and mtp.")
    use_heterogeneous_vocab: bool = Field(
        False, description="vLLM's use_heterogeneous_vocab: let a draft_model drafter whose "
        "vocabulary differs from the target's draft (vLLM keeps its draft logits to the "
        "tokens both share; greedy draft sampling). Off, as vLLM 0.32: a drafter whose "
        "vocab_size differs from the target's is refused. Emitted when on.")
    acceptance_rates: tuple[float, ...] | None = Field(
        None, json_schema_extra={"unit": "probability per draft position"},
        description="Conditional acceptance per draft position: entry i is the chance that "
        "draft i + 1 is accepted given drafts 1..i were (each in [0, 1]); shorter than K: "
        "the last entry repeats; longer: positions past K are not drafted and their entries "
        "go unused, so one measured list serves a sweep over K. Either this or "
        "acceptance_histogram; neither: 0.7 at every position (an assumption; measure your "
        "drafter).")
    acceptance_histogram: tuple[float, ...] | None = Field(
        None, json_schema_extra={"unit": "probability per accepted count"},
        description="Probability of accepting exactly 0, 1, ..., K drafts in a verify step "
        "(K + 1 entries summing to 1): a measured acceptance-length histogram.")
    acceptance_seed: int | None = Field(
        None, ge=0, le=MAX_SEED, json_schema_extra=why("a 64-bit seed", ""),
        description="Seed of the acceptance draws (unset: the scenario's seed). A request's "
        "j-th verify step draws the same outcome whatever else runs.")

    @model_validator(mode="after")
    def _one_process(self):
        k = self.num_speculative_tokens
        if self.acceptance_rates is not None and self.acceptance_histogram is not None:
            raise ValueError("give acceptance_rates or acceptance_histogram, not both")
        if self.acceptance_rates is not None:
            if not self.acceptance_rates or len(self.acceptance_rates) > MAX_SPEC_TOKENS:
                raise ValueError(f"acceptance_rates needs 1 to {MAX_SPEC_TOKENS} entries (one "
                                 f"per draft position), got {len(self.acceptance_rates)}")
            if any(not 0 <= p <= 1 for p in self.acceptance_rates):
                raise ValueError("acceptance_rates: each entry must be in [0, 1]")
        if self.acceptance_histogram is not None:
            h = self.acceptance_histogram
            if len(h) != k + 1:
                raise ValueError(f"acceptance_histogram needs K + 1 = {k + 1} entries "
                                 f"(0..K accepted), got {len(h)} (to vary K, give "
                                 "acceptance_rates: one rate per draft position)")
            if any(p < 0 for p in h) or abs(sum(h) - 1) > 1e-6:
                raise ValueError("acceptance_histogram: entries must be >= 0 and sum to 1")
        if self.method == "draft_model" and not self.model:
            raise ValueError("method draft_model needs `model` (the drafter, a catalog model)")
        if self.use_heterogeneous_vocab and self.method != "draft_model":
            raise ValueError("use_heterogeneous_vocab only works with method draft_model "
                             "(vLLM 0.32)")
        return self

    @property
    def num_lookahead_tokens(self) -> int:
        """KV slots reserved past the scheduled tokens (vllm/config/vllm.py:635-641)."""
        return self.num_speculative_tokens if self.method in (*EAGLE_FAMILY, "draft_model") \
            else 0

    @property
    def drops_last_hit_block(self) -> bool:
        """EAGLE-family prefix-cache hits drop their last block (the drafter recomputes the
        tokens before the generation point; single_type_kv_cache_manager.py:815-820)."""
        return self.method in EAGLE_FAMILY

    def conditional_rates(self) -> tuple[float, ...]:
        """Acceptance of draft i + 1 given 1..i accepted, i = 0..K-1."""
        k = self.num_speculative_tokens
        if self.acceptance_histogram is not None:
            h, out, left = self.acceptance_histogram, [], 1.0
            for i in range(k):  # P(accept i+1 | accepted i) = P(>= i+1) / P(>= i)
                nxt = left - h[i]
                out.append(nxt / left if left > 1e-12 else 0.0)
                left = max(nxt, 0.0)
            return tuple(out)
        rates = self.acceptance_rates or (0.7,)
        return tuple(rates[min(i, len(rates) - 1)] for i in range(k))

    def mean_accepted(self) -> float:
        """The process's expected accepted drafts per full verify step (tokens)."""
        mean, alive = 0.0, 1.0
        for p in self.conditional_rates():
            alive *= p
            mean += alive
        return mean

    def drafter_spec(self, target):
        """The drafter as a model (a ``ModelSpec``; None for n-gram, either kind): the catalog
        model of ``model`` for draft_model, else one decoder layer of the target with its embedding
        and lm_head (mtp keeps the target's MoE; an EAGLE head is a dense layer). Its weights
        and its KV per token are added to the memory plan (vLLM's drafter shares the KV pool:
        one more layer per token for EAGLE and MTP); its passes are priced by
        sim/cost/drafter.py."""
        if self.method in NGRAM:
            return None
        if self.method == "draft_model":
            from sim.catalog import get_model

            return get_model(self.model)
        update = {"name": f"{target.name}-{self.method}-head", "num_layers": 1,
                  "first_dense_layers": 0, "num_sliding_layers": 0}
        if self.method != "mtp" and target.num_experts:
            update |= {"num_experts": 0, "num_experts_per_tok": 0, "moe_intermediate_size": 0,
                       "num_shared_experts": 0, "shared_expert_intermediate_size": 0,
                       "moe_dtype_bits": None}
        return target.model_copy(update=update)

    def drafter_bytes(self, target, tp: int, ep: int = 1,
                      moe_tp: int | None = None) -> tuple[int, int]:
        """(weight bytes, KV bytes per token) the drafter adds on one GPU. An EAGLE or MTP
        head shares the target's embedding and lm_head (vLLM loads them from the target when
        the head's checkpoint has none), so only its layer counts; a draft model counts
        whole. Sharded as the target (TP; EP for an MTP MoE layer)."""
        d = self.drafter_spec(target)
        if d is None:
            return 0, 0
        if not d.is_moe:
            ep, moe_tp = 1, None
        weights = d.weight_bytes_per_gpu(tp, ep, moe_tp)
        if self.method != "draft_model":  # one layer: two layers' bytes less one layer's
            two = d.model_copy(update={"num_layers": 2})
            weights = two.weight_bytes_per_gpu(tp, ep, moe_tp) - weights
        return weights, d.kv_bytes_per_token(tp)

    def vllm_json(self) -> dict:
        """The value of vLLM's --speculative-config (vLLM's keys only)."""
        out = {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens}
        if self.model:
            out["model"] = self.model
        if self.use_heterogeneous_vocab:
            out["use_heterogeneous_vocab"] = True
        return out
