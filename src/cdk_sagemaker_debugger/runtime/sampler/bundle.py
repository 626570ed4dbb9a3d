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

Where the image has the library installed, this package becomes it, plus the bundle's sampler: its folder joins
``__path__`` after the bundle's and its ``__init__`` runs here, so ``from cdk_sagemaker_debugger import rules`` and
the CLI work as without the bundle (``cdk_sagemaker_debugger.sampler`` stays the bundle's, the same API).
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


def _become_the_installed_library():
    import os

    folder = _installed_library()
    if folder is None:
        return
    __path__.append(folder)
    init = os.path.join(folder, "__init__.py")
    with open(init, "rb") as handle:
        code = compile(handle.read(), init, "exec")
    exec(code, globals())


_become_the_installed_library()
del _become_the_installed_library, _installed_library
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
