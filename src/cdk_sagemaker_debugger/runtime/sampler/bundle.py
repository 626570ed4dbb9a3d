"""The sampler bundle: a folder that, zipped and put on PYTHONPATH, starts the sampler in any Python 3.8+ image.

    sitecustomize.py                     starts the sampler once per container, then the image's own sitecustomize
    cdk_sagemaker_debugger/__init__.py   no library of its own; becomes the installed library where the image has it
    cdk_sagemaker_debugger/sampler/*.py  this package, copied as is

Python imports it from the zip (zipimport), so nothing in the package reads files next to its own source. The
content is deterministic (no timestamps, no caches), so the asset hash changes only when the code does.
"""

from __future__ import annotations

import os
import pathlib
import shutil

PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
TOP_INIT = '''"""The cdk-sagemaker-debugger sampler bundle: only the sampler, not the library.

Where the image has the library installed, this package becomes it, plus the bundle's sampler: the installed folder
joins ``__path__`` after the bundle's (so ``from cdk_sagemaker_debugger import rules`` and the CLI find their modules)
and the installed ``__init__`` runs here on the first name this package lacks (``__version__``, the constructs);
``cdk_sagemaker_debugger.sampler`` stays the bundle's, the same API. Nothing more happens at every interpreter start
than a look for that folder on sys.path.
"""


def _installed_library():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        folder = os.path.join(os.path.abspath(entry or os.getcwd()), "cdk_sagemaker_debugger")
        if folder != here and os.path.isfile(os.path.join(folder, "__init__.py")):
            return folder
    return None


_INSTALLED = _installed_library()
del _installed_library
if _INSTALLED is not None:
    __path__.append(_INSTALLED)

    def __getattr__(name):
        """Become the installed library: run its ``__init__`` here once, then look the name up again."""
        import os

        init = os.path.join(_INSTALLED, "__init__.py")
        namespace = globals()
        namespace.pop("__getattr__", None)
        with open(init, "rb") as handle:
            exec(compile(handle.read(), init, "exec"), namespace)
        if name in namespace:
            return namespace[name]
        if "__getattr__" in namespace:
            return namespace["__getattr__"](name)
        raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))
'''
SITECUSTOMIZE = '''"""Starts the cdk-sagemaker-debugger sampler once per container, then runs the image's own sitecustomize.

Python runs this at every interpreter start when the sampler bundle is on PYTHONPATH; it never raises.
"""


def _cdk_sagemaker_debugger_sampler():
    try:
        from cdk_sagemaker_debugger.sampler import boot
    except Exception as exc:
        import sys

        sys.stderr.write("cdk-sagemaker-debugger sampler: not started: %s: %s\\n" % (type(exc).__name__, exc))
        return
    boot.main(__file__)


_cdk_sagemaker_debugger_sampler()
del _cdk_sagemaker_debugger_sampler
'''


def source_files() -> list:
    """Every module of the sampler package (sorted, so the bundle is the same on every machine)."""
    if not PACKAGE_DIR.is_dir():
        raise FileNotFoundError(f"{PACKAGE_DIR} is not a folder; write_bundle() runs from an installed "
                                "cdk_sagemaker_debugger, not from inside a bundle")
    return sorted(p for p in PACKAGE_DIR.glob("*.py") if p.is_file())


def write_bundle(dest: pathlib.Path) -> None:
    """Write the bundle's files into ``dest`` (created if needed; a previous bundle there is replaced)."""
    dest = pathlib.Path(dest)
    if dest.exists() and not dest.is_dir():
        raise NotADirectoryError(f"write_bundle: {dest} exists and is not a folder; pass a folder for the bundle")
    dest.mkdir(parents=True, exist_ok=True)
    top = dest / "cdk_sagemaker_debugger"
    if top.exists():
        shutil.rmtree(top)
    package = top / "sampler"
    package.mkdir(parents=True)
    (dest / "sitecustomize.py").write_bytes(SITECUSTOMIZE.encode())
    (top / "__init__.py").write_bytes(TOP_INIT.encode())
    for source in source_files():
        (package / source.name).write_bytes(source.read_bytes())
    for path in [dest / "sitecustomize.py", top / "__init__.py", *package.iterdir()]:
        os.chmod(path, 0o644)
