"""Property-based tests: whatever order, duplication, staleness, crashes, throttling and races the events come with,
every (job, rule, status) transition is notified exactly once, stopped at most once, and never stopped outside the
prefix. A RuleEvaluator verdict counts once its report says the same: a verdict the evaluator's report still shows at
the end is notified exactly once, an earlier one the report no longer shows at most once (it was out of date when a
retry came).

The crash points are before each AWS call and after StopTrainingJob. A crash between SNS accepting a message and the
ledger recording it is the one documented exception (docs/rule-alarm.md, "Exactly once"): the successor sends that
message again, by design, rather than risk losing it; it is deliberately not among the generated crash points."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from rule_alarm_world import SCHEDULED_EVENT, AwsClients, Harness

from cdk_sagemaker_debugger.runtime.rule_alarm.events import RULE_STATUSES

WATCH_PREFIX = "exp-"
STOP_PREFIX = "exp-gpu-"
JOBS = ("exp-gpu-1", "exp-cpu-2", "prod-gpu-3")  # stoppable, watched only, outside the prefix
MANAGED_RULES = ("LowGPUUtilization", "CPUBottleneck")
EVALUATOR_RULES = ("StepOutlier", "LowGPUUtilization")  # one name shared with a managed rule
TERMINAL_RULE_STATUSES = ("IssuesFound", "NoIssuesFound", "Error")


def _is_claim(params: dict[str, Any]) -> bool:
    return params.get("ConditionExpression", "").startswith("attribute_not_exists(pk)")


def _is_count(params: dict[str, Any]) -> bool:
    return "#messages" in params.get("ExpressionAttributeNames", {})


def _any(_params: dict[str, Any]) -> bool:
    return True


# where a fault can strike: (operation, which calls of it)
FAULT_POINTS = {
    "describe": ("DescribeTrainingJob", _any),
    "watch": ("PutItem", _any),
    "sweep-query": ("Query", _any),
    "claim": ("UpdateItem", _is_claim),
    "report": ("GetObject", _any),
    "count": ("UpdateItem", _is_count),
    "stop": ("StopTrainingJob", _any),
    "publish": ("Publish", _any),
    "announce": ("PutEvents", _any),
}
CRASH_POINTS = (*FAULT_POINTS, "after-stop")

jobs = st.sampled_from(JOBS)
stale_detail = st.fixed_dictionaries(
    {
        "TrainingJobStatus": st.sampled_from(("InProgress", "Completed", "Stopped")),
        "ProfilerRuleEvaluationStatuses": st.lists(
            st.fixed_dictionaries(
                {
                    "RuleConfigurationName": st.sampled_from(MANAGED_RULES),
                    "RuleEvaluationStatus": st.sampled_from(sorted(RULE_STATUSES)),
                    "LastModifiedTime": st.one_of(st.integers(0, 2**41), st.text(max_size=12)),
                }
            ),
            max_size=2,
        ),
    }
)
verdicts = st.sampled_from(("IssuesFound", *TERMINAL_RULE_STATUSES))  # findings twice as likely
STEPS: dict[str, tuple[int, st.SearchStrategy[tuple[Any, ...]]]] = {  # kind: (weight, arguments)
    "rule": (4, st.tuples(st.just("rule"), jobs, st.sampled_from(MANAGED_RULES), verdicts)),
    "evaluator": (
        2,
        st.tuples(
            st.just("evaluator"),
            jobs,
            st.sampled_from(EVALUATOR_RULES),
            st.sampled_from(sorted(RULE_STATUSES)),
            st.integers(1, 2),
        ),
    ),
    "end": (1, st.tuples(st.just("end"), jobs, st.sampled_from(("Completed", "Failed")))),
    "settle": (1, st.tuples(st.just("settle"), jobs)),
    "event": (2, st.tuples(st.just("event"), jobs, st.integers(1, 3), st.one_of(st.none(), stale_detail))),
    "replay": (1, st.tuples(st.just("replay"), st.integers(0, 1000))),
    "sweep": (1, st.just(("sweep",))),
    "tick": (1, st.tuples(st.just("tick"), st.sampled_from((1, 45, 200, 1200)))),
    "crash": (1, st.tuples(st.just("crash"), st.sampled_from(CRASH_POINTS))),
    "fail": (1, st.tuples(st.just("fail"), st.sampled_from(tuple(FAULT_POINTS)))),
    # another invocation runs at that point: mostly a concurrent duplicate of the same event, else a sweep or a job event
    "race": (
        2,
        st.tuples(
            st.just("race"),
            st.sampled_from(tuple(FAULT_POINTS)),
            st.sampled_from(("duplicate", "duplicate", "duplicate", "sweep", *JOBS)),
        ),
    ),
}
# verdicts are what the scenarios are about, so they come up more often than the other steps
step = st.sampled_from([kind for kind, (weight, _) in STEPS.items() for _ in range(weight)]).flatmap(
    lambda kind: STEPS[kind][1]
)
configurations = st.fixed_dictionaries(
    {
        "statuses": st.sampled_from((frozenset({"IssuesFound"}), frozenset({"IssuesFound", "Error"}))),
        "rule_names": st.sampled_from((None, frozenset({"LowGPUUtilization", "StepOutlier"}))),
        "stop_prefix": st.sampled_from((STOP_PREFIX, WATCH_PREFIX, None)),
    }
)


def _run(harness: Harness, steps: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Play the scenario; return the evaluator events that were delivered (they are the only record of them)."""
    world = harness.world
    for name in JOBS:
        world.add(name, MANAGED_RULES)
    delivered: list[Any] = []
    evaluator_events: list[dict[str, Any]] = []

    def deliver(event: Any) -> None:
        delivered.append(event)
        harness.invoke(event)

    for kind, *args in steps:
        if kind == "rule":
            world.set_rule(*args)
        elif kind == "end":
            world.end(*args)
        elif kind == "settle":
            world.settle(*args)
        elif kind == "event":
            name, copies, stale = args
            detail = None if stale is None else {"TrainingJobName": name, **stale}
            for _ in range(copies):
                deliver(world.state_change_event(name, detail=detail))
        elif kind == "evaluator":
            name, rule, status, copies = args
            entry = {
                "RuleConfigurationName": rule,
                "RuleEvaluationStatus": status,
                "LastModifiedTime": harness.clock.now,
            }
            event = harness.evaluator_verdict(name, [entry])
            evaluator_events.append(event)
            for _ in range(copies):
                deliver(event)
        elif kind == "replay" and delivered:
            deliver(delivered[args[0] % len(delivered)])  # an old event, late and out of order
        elif kind == "sweep":
            deliver(SCHEDULED_EVENT)
        elif kind == "tick":
            harness.clock.advance(args[0])
        elif kind == "crash":
            if args[0] == "after-stop":
                harness.crash_at("StopTrainingJob:after")
            else:
                harness.crash_at(*FAULT_POINTS[args[0]])
        elif kind == "fail":
            harness.fail_at(*FAULT_POINTS[args[0]])
        elif kind == "race":
            point, target = args
            if target == "duplicate":
                harness.run_nested_at(FAULT_POINTS[point][0])
            else:
                event = SCHEDULED_EVENT if target == "sweep" else world.state_change_event(target)
                harness.run_nested_at(FAULT_POINTS[point][0], event)
    harness.drain()
    return evaluator_events


def _expected(
    harness: Harness, evaluator_events: list[dict[str, Any]]
) -> tuple[Counter[tuple[str, str, str]], set[tuple[str, str, str]]]:
    """Every wanted transition SageMaker showed, or the evaluator reported and its report still shows, for jobs under
    the watched prefix: once. And the evaluator's superseded verdicts, which may have been notified once."""
    cfg = harness.settings

    def wanted(name: str, rule: str, status: str) -> bool:
        return (
            cfg.family.name_may_belong(name)
            and status in cfg.statuses
            and (cfg.rule_names is None or rule in cfg.rule_names)
        )

    expected = set()
    superseded = set()
    for name, job in harness.world.jobs.items():
        expected |= {(name, rule, status) for rule, status in job.rules.items() if wanted(name, rule, status)}
    for delivered in evaluator_events:
        name = delivered["detail"]["TrainingJobName"]
        for entry in delivered["detail"]["ProfilerRuleEvaluationStatuses"]:
            rule, status = entry["RuleConfigurationName"], entry["RuleEvaluationStatus"]
            if wanted(name, rule, status):
                current = harness.evaluator_reports.get((name, rule)) == status
                (expected if current else superseded).add((name, rule, status))
    return Counter(dict.fromkeys(expected, 1)), superseded - expected


def _at_most_once_beyond(observed: Counter[tuple[str, str, str]], expected: Counter[tuple[str, str, str]],
                         optional: set[tuple[str, str, str]]) -> bool:
    extra = observed - expected
    return all(key in optional and count == 1 for key, count in extra.items()) and not expected - observed


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(config=configurations, steps=st.lists(step, min_size=4, max_size=14))
def test_each_transition_is_notified_exactly_once_and_stopped_at_most_once(
    aws: AwsClients, config: dict[str, Any], steps: list[tuple[Any, ...]]
) -> None:
    with Harness(aws, settings=config) as harness:
        evaluator_events = _run(harness, steps)

        assert harness.unexpected == []
        expected, superseded = _expected(harness, evaluator_events)
        event(f"transitions to report: {min(len(expected), 3)}{'+' if len(expected) >= 3 else ''}")
        event(f"StopTrainingJob calls: {min(len(harness.stop_calls), 2)}")
        assert _at_most_once_beyond(harness.notifications(), expected, superseded), (harness.notifications(), expected)
        announced = Counter(
            (d["TrainingJobName"], d["RuleConfigurationName"], d["RuleEvaluationStatus"]) for d in harness.announced
        )
        assert _at_most_once_beyond(announced, expected, superseded), (announced, expected)

        effective_stops = Counter(
            (name, transition) for name, transition, outcome in harness.stop_calls if outcome != "throttled"
        )
        assert all(count == 1 for count in effective_stops.values()), effective_stops
        stop_prefix = config["stop_prefix"]
        for name, transition, _outcome in harness.stop_calls:
            assert stop_prefix is not None and name.startswith(stop_prefix), (name, stop_prefix)
            assert transition is not None and ((name, *transition) in expected or (name, *transition) in superseded)
            assert transition[1] == "IssuesFound", "only a rule that found issues may stop training"

        ledger = harness.ledger_items()
        assert [item for item in ledger if item.get("state") == "pending"] == []
        watched = {item["sk"] for item in ledger if item["pk"] == "watched"}
        for name, job in harness.world.jobs.items():
            finished = job.status not in ("InProgress", "Stopping") and "InProgress" not in job.rules.values()
            under_prefix = name.startswith(WATCH_PREFIX)
            assert (name in watched) == (under_prefix and not finished), (name, job)
