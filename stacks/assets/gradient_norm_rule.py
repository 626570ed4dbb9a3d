"""A custom debugger rule: fires when the L2 norm of any saved gradient exceeds `max_norm` (exploding gradients).

Runs inside SageMaker's custom rule evaluator image, which provides smdebug and numpy. Rule parameters arrive as
strings.
"""

import numpy as np
from smdebug.rules.rule import Rule  # provided by the evaluator image


class GradientNorm(Rule):
    def __init__(self, base_trial, max_norm="100"):
        super().__init__(base_trial)
        self.max_norm = float(max_norm)

    def invoke_at_step(self, step):
        for name in self.base_trial.tensor_names(collection="gradients"):
            norm = float(np.linalg.norm(self.base_trial.tensor(name).value(step)))
            if norm > self.max_norm:
                self.logger.info(f"{name}: gradient norm {norm:.3g} at step {step} exceeds {self.max_norm:g}")
                return True
        return False
