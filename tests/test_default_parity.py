"""The configuration catalog (what the SDK sends, model layer) and the evaluator (runtime layer) keep two default
tables. They agree except in two places, on purpose (docs/evaluator.md explains both): this test pins exactly those
two, so drift in either file fails here."""

from __future__ import annotations

from cdk_sagemaker_debugger.model.profiler_catalog import PROFILER_RULE_SPECS
from cdk_sagemaker_debugger.runtime.evaluator.rules import RULE_CLASSES

#: (rule, parameter) -> (the catalog's default, the evaluator's default); None: the table has no such parameter.
DELIBERATE = {
    ("LoadBalancing", "threshold"): (0.5, 0.2),
    ("Dataloader", "patience"): (None, 10),
}


#: Accepted from the SDK and ignored by the evaluator, which runs every minute whatever the managed rule's scan interval.
NOT_EVALUATED = {"scan_interval_us"}


def _catalog(rule: str) -> dict[str, object]:
    return {p.name: p.default for p in PROFILER_RULE_SPECS[rule].parameters if p.name not in NOT_EVALUATED}


def _evaluator(rule: str) -> dict[str, object]:
    cls = RULE_CLASSES[rule]
    return dict(cls.PARAMETERS) | dict(cls.HIDDEN_PARAMETERS)


def test_the_two_default_tables_differ_only_where_documented() -> None:
    differences = {}
    for rule in sorted(set(PROFILER_RULE_SPECS) & set(RULE_CLASSES)):
        catalog, evaluator = _catalog(rule), _evaluator(rule)
        for name in sorted(set(catalog) | set(evaluator)):
            if catalog.get(name) != evaluator.get(name):
                differences[(rule, name)] = (catalog.get(name), evaluator.get(name))
    assert differences == DELIBERATE
