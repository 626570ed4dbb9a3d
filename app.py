#!/usr/bin/env python3
"""The reference app: every stack in ``stacks/``, checked by cdk-nag's AwsSolutions pack. ``make synth`` runs it."""

import stacks  # noqa: F401  (selects a supported Node.js for jsii before aws_cdk loads)
from stacks.registry import build_app

build_app().synth()
