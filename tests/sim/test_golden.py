"""Golden tiny traces with hand-computed event logs (linear cost: 10 ms + 1 ms/prefill token).

Each expected log is worked out by hand in the comments, step by step.
"""

from __future__ import annotations

import pytest

from tests.sim.helpers import event_log, run


def assert_log(sim, expected):
    got = event_log(sim)
    assert [(r, e) for r, e, _ in got] == [(r, e) for r, e, _ in expected]
    for (r, e, t), (_, _, want) in zip(got, expected):
        assert t == pytest.approx(want, abs=1e-12), (r, e)


def test_lone_request():
    # P=8, O=3. Step 1 [0, 18 ms): prefill 8 -> token 1. Steps 2, 3: decodes of 10 ms.
    sim = run([0.0], [8], [3])
    assert_log(sim, [(0, "arrive", 0), (0, "scheduled", 0), (0, "first_token", 0.018),
                     (0, "finish", 0.038)])
    assert [s[1] for s in sim.steps] == [{0: 8}, {0: 1}, {0: 1}]
    assert sim.recorder.max_itl_s[0] == pytest.approx(0.010)


def test_two_requests_share_steps():
    # r0 P=8 O=3 at 0; r1 P=4 O=2 arrives at 10 ms, during step 1 [0, 18).
    # step 2 [18, 32): r0 decode + r1 prefill 4 (14 ms) -> r0 token 2, r1 token 1
    # step 3 [32, 42): both decode -> r0 token 3 (done), r1 token 2 (done)
    sim = run([0.0, 0.010], [8, 4], [3, 2])
    assert_log(sim, [
        (0, "arrive", 0), (0, "scheduled", 0), (1, "arrive", 0.010),
        (0, "first_token", 0.018), (1, "scheduled", 0.018),
        (1, "first_token", 0.032), (0, "finish", 0.042), (1, "finish", 0.042)])
    assert [s[1] for s in sim.steps] == [{0: 8}, {0: 1, 1: 4}, {0: 1, 1: 1}]


def test_chunked_prefill_across_steps():
    # budget 8 tokens. r0 P=20 O=2 at 0; r1 P=2 O=3 at 5 ms.
    # s1 [0, 18): r0 8 | s2 [18, 36): r0 8, budget spent, r1 waits
    # s3 [36, 52): r0 last 4 + r1 2 (16 ms) -> both first tokens
    # s4 [52, 62): both decode, r0 done | s5 [62, 72): r1 done
    sim = run([0.0, 0.005], [20, 2], [2, 3], max_num_batched_tokens=8)
    assert [s[1] for s in sim.steps] == [{0: 8}, {0: 8}, {0: 4, 1: 2}, {0: 1, 1: 1}, {1: 1}]
    assert_log(sim, [
        (0, "arrive", 0), (0, "scheduled", 0), (1, "arrive", 0.005),
        (1, "scheduled", 0.036), (0, "first_token", 0.052), (1, "first_token", 0.052),
        (0, "finish", 0.062), (1, "finish", 0.072)])


def test_preemption_when_blocks_run_out():
    # 4 usable blocks of 4 slots. r0 P=7 O=6, r1 P=5 O=4, both at 0.
    # s1 [0, 22): admit r0 (2 blocks) and r1 (2 blocks): 12 prefill tokens; free 0
    # s2 [22, 32): both decode within their blocks (r0 slot 8, r1 slot 6)
    # s3 [32, 42): r0 needs slot 9 -> a 3rd block: preempt the tail r1 (6 tokens dropped)
    # s4..s6 [42, 72): r0 decodes; r1 (7 tokens to recompute = 2 blocks) does not fit in 1
    # s7 [72, 89): r1 recomputes 7 tokens -> token 3 | s8 [89, 99): token 4, done
    sim = run([0.0, 0.0], [7, 5], [6, 4], usable_blocks=4, block_size=4, max_model_len=16)
    assert [s[1] for s in sim.steps] == [
        {0: 7, 1: 5}, {0: 1, 1: 1}, {0: 1}, {0: 1}, {0: 1}, {0: 1}, {1: 7}, {1: 1}]
    assert sim.steps[2][2] == [1]
    assert_log(sim, [
        (0, "arrive", 0), (0, "scheduled", 0), (1, "arrive", 0), (1, "scheduled", 0),
        (0, "first_token", 0.022), (1, "first_token", 0.022), (1, "preempt", 0.032),
        (0, "finish", 0.072), (1, "finish", 0.099)])
    assert sim.scheduler.num_preemptions.tolist() == [0, 1]
    assert sim.scheduler.recomputed_tokens == 6
    assert sim.recorder.max_itl_s[1] == pytest.approx(0.089 - 0.032)


def test_length_rules_as_vllms_server():
    # max_model_len 16. r0 P=10 O=7: 17 > 16 -> served with max_tokens 16 - 10 = 6;
    # r1 P=4 O=2 fits; r2 P=16 leaves no room for one output token -> rejected at arrival.
    # s1 [0, 24): r0 10 + r1 4 prefill -> first tokens | s2 [24, 34): r1 token 2, done
    # s3..s6 [34, 74): r0 tokens 3..6, done at 74 ms
    sim = run([0.0, 0.0, 0.0], [10, 4, 16], [7, 2, 1], max_model_len=16)
    assert_log(sim, [(0, "arrive", 0), (0, "scheduled", 0), (1, "arrive", 0),
                     (1, "scheduled", 0), (2, "arrive", 0), (2, "reject", 0),
                     (0, "first_token", 0.024), (1, "first_token", 0.024), (1, "finish", 0.034),
                     (0, "finish", 0.074)])
    assert sim.specs.output_tokens.tolist() == [6, 2, 1]
    assert sim.scheduler.generated.tolist() == [6, 2, 0]


def test_strict_length_rule_rejects_over_max_model_len():
    # engine.strict_max_model_len: r0 10 + 7 = 17 > 16 tokens -> rejected; r1 runs alone.
    sim = run([0.0, 0.0], [10, 4], [7, 2], max_model_len=16, strict_len=True)
    assert_log(sim, [(0, "arrive", 0), (0, "reject", 0), (1, "arrive", 0),
                     (1, "scheduled", 0), (1, "first_token", 0.014), (1, "finish", 0.024)])


def test_arrival_at_step_start_is_visible():
    # r1 arrives exactly when step 1 ends (18 ms): the step starting then must include it.
    # 18 * 1e-3 is 0.018000000000000002; the nanosecond clock reads both as 18,000,000 ns
    for end in (0.018, 18 * 1e-3):
        sim = run([0.0, end], [8, 4], [2, 2])
        assert sim.steps[1][1] == {0: 1, 1: 4}
        assert sim.steps[1][0] == 0.018


def test_no_chunking_stops_admission_at_a_prompt_over_budget():
    # budget 8, chunked prefill off: r0 (4) fits, r1 (6) exceeds the 4 left -> waits a step.
    sim = run([0.0, 0.0], [4, 6], [2, 2], max_num_batched_tokens=8, chunked=False,
              max_model_len=8)
    assert [s[1] for s in sim.steps] == [{0: 4}, {0: 1, 1: 6}, {1: 1}]


def test_long_prefill_threshold_caps_chunks():
    # threshold 3, r0 P=7 O=2 and r1 P=2 O=2 at 0: r0 takes 3 + 3 + 1 tokens over three steps
    # s1 [0, 15): r0 3 + r1 2 | s2 [15, 28): r0 3 + r1 decode (done) | s3 [28, 38): r0's
    # last prompt token -> first token at 38 ms | s4: r0 decode
    sim = run([0.0, 0.0], [7, 2], [2, 2], threshold=3)
    assert [s[1] for s in sim.steps] == [{0: 3, 1: 2}, {0: 3, 1: 1}, {0: 1}, {0: 1}]
    assert sim.recorder.first_token_s[0] == pytest.approx(0.015 + 0.013 + 0.010)


def test_long_prefill_threshold_lifted_for_a_lone_request():
    # vLLM 0.32: nobody to starve, so a lone request's prompt is not capped (7 tokens at once)
    sim = run([0.0], [7], [2], threshold=3)
    assert [s[1] for s in sim.steps] == [{0: 7}, {0: 1}]


@pytest.mark.parametrize("adaptive, expected", [
    # cap 3 while r1 is there; r0 alone at s3 takes its remaining 14 tokens at once
    (False, [{0: 3, 1: 2}, {0: 3, 1: 1}, {0: 14}, {0: 1}]),
    # adaptive: the cap is floored at budget 16 // 2 requests = 8
    (True, [{0: 8, 1: 2}, {0: 8, 1: 1}, {0: 4}, {0: 1}]),
])
def test_adaptive_long_prefill_threshold(adaptive, expected):
    sim = run([0.0, 0.0], [20, 2], [2, 2], threshold=3, max_num_batched_tokens=16,
              adaptive=adaptive)
    assert [s[1] for s in sim.steps] == expected


def test_max_num_seqs_queues_the_rest():
    # one running sequence at a time: r1 starts only when r0 finishes.
    sim = run([0.0, 0.0], [2, 2], [2, 2], max_num_seqs=1)
    assert [s[1] for s in sim.steps] == [{0: 2}, {0: 1}, {1: 2}, {1: 1}]


@pytest.mark.parametrize("full_isl, expected, preempted", [
    # on (vLLM 0.32's default): r1's 30 tokens need 8 blocks; 7 are free while r0 runs, so r1
    # waits until r0 finishes and then prefills 8 + 8 + 8 + 6 tokens; nobody is preempted
    (True, [{0: 8}] + [{0: 1}] * 5 + [{1: 8}, {1: 8}, {1: 8}, {1: 6}, {1: 1}], []),
    # off: r1 is admitted a chunk at a time (7 + 7 + 7 + 7 tokens, 7 blocks) and takes the
    # last free block, so r0's 4th block (token 13, step 6) preempts r1: 28 tokens recomputed
    (False, [{0: 8}] + [{0: 1, 1: 7}] * 4 + [{0: 1}, {1: 8}, {1: 8}, {1: 8}, {1: 6}, {1: 1}],
     [1]),
])
def test_whole_prompt_must_fit_at_admission(full_isl, expected, preempted):
    # 10 usable blocks of 4 slots, budget 8 tokens; r0 P=8 O=6 and r1 P=30 O=2 at 0.
    sim = run([0.0, 0.0], [8, 30], [6, 2], usable_blocks=10, block_size=4,
              max_num_batched_tokens=8, max_model_len=40, full_isl=full_isl)
    assert [s[1] for s in sim.steps] == expected
    assert [p for s in sim.steps for p in s[2]] == preempted
