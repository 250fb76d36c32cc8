"""The declared space (its order, its constraints and what they exclude) and the record's
ranking: best first, two overlapping intervals a tie, significant differences said."""

from __future__ import annotations

import pytest
from roofbench.bench.tune.record import Trial, overlap, rank
from roofbench.bench.tune.space import (
    Space,
    SpaceError,
    at_least,
    at_most,
    divides,
    label,
    ordered,
    space,
    where,
)


def test_the_product_in_declared_order_first_parameter_slowest():
    sp = space({"BM": [16, 32], "BN": [8, 16, 32]})
    assert [label(c) for c in sp.configs()] == [
        "BM=16,BN=8", "BM=16,BN=16", "BM=16,BN=32", "BM=32,BN=8", "BM=32,BN=16",
        "BM=32,BN=32"]


def test_declarative_rules_and_a_predicate_exclude_and_say_why():
    sp = space({"BM": [16, 32, 48, 64], "BN": [16, 32, 64]},
               where=[divides("BM", 64), at_most(["BM", "BN"], 1024), ordered("BN", "BM"),
                      at_least("BN", 32), where(lambda c: c["BM"] != 64, "BM is not 64")])
    assert sp.configs() == [{"BM": 32, "BN": 32}]
    why = {label(c): w for c, w in sp.excluded()}
    assert why["BM=48,BN=16"] == "BM divides 64"
    assert why["BM=32,BN=64"] == "BM * BN <= 1024"
    assert why["BM=16,BN=16"] == "BN >= 32"
    assert why["BM=64,BN=32"] == "BM * BN <= 1024"
    assert why["BM=64,BN=16"] == "BN >= 32"
    assert len(why) + 1 == 12


def test_a_bare_predicate_is_a_constraint_named_by_its_function():
    def small(c):
        return c["B"] < 3

    sp = space({"B": [1, 2, 3]}, where=small)
    assert sp.excluded() == [({"B": 3}, "small")]


def test_a_list_of_configurations_is_a_space_tried_in_its_order():
    sp = Space.of([{"B": 4, "W": 2}, {"B": 1, "W": 8}])
    assert sp.configs() == [{"B": 4, "W": 2}, {"B": 1, "W": 8}]


@pytest.mark.parametrize("params, words", [
    ({}, "at least one parameter"), ({"B": []}, "has no values"),
    ({"B": "abc"}, "as a list"), ({"B": [1, 1]}, "lists a value twice"),
    ({"1B": [1]}, "not a Python identifier"),
])
def test_a_malformed_space_is_one_line(params, words):
    with pytest.raises(SpaceError, match=words):
        space(params)


def test_every_configuration_excluded_or_a_raising_rule_is_one_line():
    with pytest.raises(SpaceError, match="every configuration"):
        space({"B": [3, 5]}, where=divides("B", 16)).configs()
    with pytest.raises(SpaceError, match="raised KeyError"):
        space({"B": [3]}, where=lambda c: c["X"]).configs()


def trial(i, samples, rates=(), value=None, probe="memory:dram:stream-add-nt", status="ok"):
    return Trial(i, {"B": i}, f"B={i}", status, samples_s=tuple(samples),
                 roof_rates=tuple(rates), roof_value=value, roof_probe=probe if rates else "")


def spread(center, n=20, width=0.01):
    return [center * (1 + width * (k / (n - 1) - 0.5)) for k in range(n)]


def test_overlapping_intervals_are_a_tie_and_disjoint_ones_significant():
    a, b, c = trial(0, spread(1.00)), trial(1, spread(1.004)), trial(2, spread(1.10))
    basis, ranking = rank([c, b, a])
    assert basis == "raw"
    assert [r.index for r in ranking] == [0, 1, 2]  # best first
    first, second, third = ranking
    assert first.tied_with == (1,) and second.tied_with == (0,) and third.tied_with == ()
    assert first.differs_from_next is False  # a tie: not a significant difference
    assert second.differs_from_next is True and third.differs_from_next is None
    assert second.ties_best and not third.ties_best


def test_too_few_samples_for_an_interval_is_never_called_different():
    a, b = trial(0, spread(1.0)), trial(1, [1.5, 1.6, 1.7])  # 3 samples: no 95% interval
    _, ranking = rank([a, b])
    assert ranking[1].interval_s is None and ranking[1].ties_best
    assert overlap(None, (0.0, 1.0))


def test_the_paired_basis_needs_one_roof_for_all():
    r = [50e9] * 20
    a = trial(0, spread(2.0), r, 100e9)
    b = trial(1, spread(1.5), [100e9] * 20, 100e9)
    basis, ranking = rank([a, b])
    assert basis == "paired" and [x.index for x in ranking] == [0, 1]  # 1.0 vs 1.5
    assert ranking[0].median_s == pytest.approx(1.0)
    other = trial(1, spread(1.5), [100e9] * 20, 100e9, probe="compute:fp32:fma")
    assert rank([a, other])[0] == "raw"


def test_dropped_and_failed_trials_are_not_ranked():
    ts = [trial(0, spread(1.0)), trial(1, spread(0.5), status="dropped"),
          trial(2, (), status="invalid")]
    assert [r.index for r in rank(ts)[1]] == [0]


def test_the_rest_after_a_screen_has_the_screens_time_and_samples_taken_off():
    from roofbench.bench.tune.measured import joined, rest_timer

    from roofbench.timing import TimerConfig, Timing

    full = TimerConfig(warmup_s=0.1, min_samples=12, max_samples=100, budget_s=2.0)
    screen = Timing(samples=[0.1] * 5, warmup_runs=2, stopped_by="max_samples",
                    roof_probe="memory:dram:x", roof_rates=[1e9] * 5, waits=[0.0] * 5)
    rest = rest_timer(full, screen, screen_s=1.2)  # its roof samples took as long again
    assert (rest.warmup_s, rest.min_samples, rest.max_samples) == (0.0, 7, 95)
    assert rest.budget_s == pytest.approx(0.8)
    assert rest_timer(full, screen).budget_s == pytest.approx(1.5)  # the samples alone
    after = Timing(samples=[0.2] * 7, warmup_runs=1, stopped_by="noise",
                   roof_probe="memory:dram:x", roof_rates=[2e9] * 7)
    both = joined(screen, after)
    assert both.samples == [0.1] * 5 + [0.2] * 7 and both.roof_rates == [1e9] * 5 + [2e9] * 7
    assert both.stopped_by == "noise" and both.warmup_runs == 3
    assert both.waits == []  # the rest has no waits: none kept rather than half


def test_a_paired_median_above_its_roof_ranks_on_raw_times():
    from roofbench.bench.tune.record import Trial, basis_of

    def trial(i, rates, roof_time):
        return Trial(i, {"B": i}, f"B={i}", "ok", samples_s=(1.0, 1.0, 1.0),
                     roof_rates=rates, roof_probe="p", roof_value=100.0,
                     roof_time_s=roof_time)

    good = [trial(1, (90.0, 100.0, 95.0), 0.5), trial(2, (100.0, 100.0, 100.0), 0.5)]
    assert basis_of(good) == "paired"
    # one roof sample set 1000x low: B=2's paired median is 0.001 s, under its 0.5 s roof time
    bad = [good[0], trial(2, (0.1, 0.1, 100.0), 0.5)]
    assert basis_of(bad) == "raw"
