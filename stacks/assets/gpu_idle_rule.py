"""A custom profiler rule: fires when any GPU reports 0 % utilization for `patience` consecutive samples.

Runs inside SageMaker's custom rule evaluator image, which provides the smdebug package.
"""

from smdebug.profiler.analysis.rules.rule import Rule  # provided by the evaluator image


class GpuIdleRule(Rule):
    def __init__(self, base_trial, patience="10"):
        super().__init__(base_trial)
        self.patience = int(patience)
        self.idle = {}

    def invoke_at_step(self, step):
        for event in self.base_trial.get_system_metrics(step):
            if event.dimension == "GPUUtilization":
                self.idle[event.name] = self.idle.get(event.name, 0) + 1 if event.value == 0 else 0
        return any(count >= self.patience for count in self.idle.values())
