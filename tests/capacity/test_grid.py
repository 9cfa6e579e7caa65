"""Grids, load ranges and points: what a sweep runs, and the ids that name results."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.config.load import load_scenario
from sim.plan.grid import RATE_KEY, SCALE_KEY, Point, digest, make_plan, parse_grid, parse_loads
from traces.errors import InputError

from .helpers import TINY


def test_grid_values_are_yaml_typed_in_order():
    assert parse_grid(["engine.max_num_seqs=64,256", "scheduler.name=vllm,sarathi",
                       "engine.enable_chunked_prefill=true,false"]) == [
        ("engine.max_num_seqs", [64, 256]), ("scheduler.name", ["vllm", "sarathi"]),
        ("engine.enable_chunked_prefill", [True, False])]


@pytest.mark.parametrize("bad", ["engine.max_num_seqs", "=1,2", "engine.max_num_seqs=",
                                 "engine.max_num_seqs=1,1", "engine.max_num_seqs=64,,128",
                                 "engine.max_num_seqs=64,", "scheduler=[{name: vllm}, {name: "])
def test_bad_grid_is_one_input_error(bad):
    with pytest.raises(InputError, match="--grid"):
        parse_grid([bad])


def test_a_key_given_twice_is_refused():
    with pytest.raises(InputError, match="given twice"):
        parse_grid(["a.b=1", "a.b=2"])


def test_ranges_include_both_ends_without_float_drift():
    assert parse_loads("0.1:0.5:0.1", "--rate") == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert parse_loads("4:40:4", "--rate") == [4.0, 8.0, 12.0, 16.0, 20.0, 24.0, 28.0, 32.0,
                                                36.0, 40.0]
    assert parse_loads("2,4,8", "--rate") == [2.0, 4.0, 8.0]


@pytest.mark.parametrize("bad", ["1:2", "a:2:1", "4:2:1", "0:2:1", "1:2:-1", "x", "1e9999",
                                 "4,,8", "4,", "4,4"])
def test_bad_ranges_are_refused(bad):
    with pytest.raises(InputError):
        parse_loads(bad, "--rate")


def test_an_empty_load_option_is_refused_not_ignored():
    sc = load_scenario(TINY).scenario
    with pytest.raises(InputError, match="--rate: empty"):
        make_plan(sc, None, " ", None, 1)
    # the option is named, not the scenario's rate field it becomes
    with pytest.raises(InputError, match=r"--rate '1e-9,5': 1e-09 req/s; rates run from "):
        make_plan(sc, None, "1e-9,5", None, 1)


def test_plan_is_the_cross_product_of_configs_loads_and_seeds():
    sc = load_scenario(TINY).scenario
    plan = make_plan(sc, ["engine.max_num_seqs=8,64", "engine.block_size=16,32"], "4:8:2", None,
                     seeds=2)
    pts = plan.points()
    assert len(pts) == 2 * 2 * 3 * 2
    assert len({p.id for p in pts}) == len(pts)
    assert {p.seed for p in pts} == {0, 1} and plan.load_key == RATE_KEY
    assert pts[0].label == "max_num_seqs=8 block_size=16"


def test_the_load_axis_follows_the_workload():
    sc = load_scenario(TINY).scenario
    with pytest.raises(InputError, match="use --rate"):
        make_plan(sc, None, None, "1:2:1", 1)
    replay = load_scenario(None, (), "scenarios/traces/chat-15min.csv").scenario
    assert make_plan(replay, None, None, "1,2", 1).load_key == SCALE_KEY
    with pytest.raises(InputError, match="use --rate-scale"):
        make_plan(replay, None, "1:2:1", None, 1)


def test_a_grid_over_the_load_key_is_the_load_axis():
    sc = load_scenario(TINY).scenario
    plan = make_plan(sc, [f"{RATE_KEY}=2,4"], None, None, 1)
    assert plan.load_key == RATE_KEY and plan.loads == (2.0, 4.0) and plan.grid == ()


def test_seed_is_not_a_grid_key():
    with pytest.raises(InputError, match="--seeds"):
        make_plan(load_scenario(TINY).scenario, ["seed=1,2"], None, None, 1)


@given(st.permutations([("a.x", 1), ("b.y", "s"), ("c", 2.5)]))
def test_a_point_id_does_not_depend_on_key_order(pairs):
    assert digest(pairs) == digest(sorted(pairs))


def test_point_ids_are_stable_across_versions():
    # a sweep folder written today must resume tomorrow: the id is part of the file format
    p = Point((("engine.max_num_seqs", 64),), RATE_KEY, 8.0, 0)
    assert p.id == digest([("engine.max_num_seqs", 64), (RATE_KEY, 8.0), ("seed", 0)])
    assert p.id == "462f77cca8a4bb48"
