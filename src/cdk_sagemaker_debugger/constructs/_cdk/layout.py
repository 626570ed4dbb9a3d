"""Where the RuleEvaluator keeps its objects in a run's output (the construct side of the runtime's layout)."""

from __future__ import annotations

__all__ = ["EVALUATOR_REPORT_FOLDER", "EVALUATOR_STATE_FILE", "EVALUATOR_SUMMARY_FILE"]

#: Where the RuleEvaluator keeps its own objects under ``<output>/<job>/rule-output/`` (the runtime writes them; a test
#: checks both layers agree): its state object, and ``<RuleConfigurationName>/evaluator-output/`` with the reports.
EVALUATOR_STATE_FILE = "evaluator-state.json.gz"
EVALUATOR_REPORT_FOLDER = "evaluator-output"
EVALUATOR_SUMMARY_FILE = "evaluation-summary.json"
