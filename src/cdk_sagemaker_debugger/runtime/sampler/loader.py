"""``sampler.wrap(loader)``: the time the training loop is blocked in the DataLoader's ``__next__``, and its setup.

Events, in Debugger's PyTorch names (its Dataloader rule reads them):

* ``DataLoaderIterInitialize`` once per ``iter(loader)``: args num_workers, pin_memory, worker_pids, rank, local_rank;
* ``DataLoaderIter`` per batch: how long ``__next__`` blocked the main process (args pid, rank, local_rank);
* ``DataLoaderWorker`` at most once per second and worker process: the worker's pid, with that batch's duration, so
  that the Dataloader rule counts the parallel loader processes it would have seen from AWS's patched PyTorch.

Works with any iterable (no torch import); the worker pids come from PyTorch's multiprocessing iterator when it has
them (``_workers``, present in every 1.x and 2.x release; absent: none reported). Attributes of the loader pass through.
"""

from __future__ import annotations

import time

from .api import log_once
from .phases import record

WORKER_EVERY_S = 1.0


def _worker_pids(iterator: object) -> list:
    try:
        workers = getattr(iterator, "_workers", None) or []
        return [w.pid for w in workers if isinstance(getattr(w, "pid", None), int)]
    except Exception:  # a torch version with other internals: no pids, never an error
        return []


def _setting(loader: object, name: str) -> object:
    value = getattr(loader, name, None)
    return value if isinstance(value, (bool, int, float, str)) or value is None else str(value)


class _TimedIterator:
    __slots__ = ("iterator", "name", "workers", "worker_mark")

    def __init__(self, iterator: object, workers: list):
        self.iterator = iterator
        self.name = f"{type(iterator).__name__}.__next__"
        self.workers = workers
        self.worker_mark = 0.0

    def __iter__(self) -> _TimedIterator:
        return self

    def __next__(self) -> object:
        started = time.time()
        item = next(self.iterator)  # StopIteration passes through unrecorded
        ended = time.time()
        try:
            record("DataLoaderIter", self.name, started, ended)
            if self.workers and ended - self.worker_mark >= WORKER_EVERY_S:
                self.worker_mark = ended
                for pid in self.workers:
                    record("DataLoaderWorker", "DataLoaderWorker", started, ended, {"pid": pid})
        except Exception as exc:  # never into training
            log_once("loader", f"wrap(loader) failed to record: {type(exc).__name__}: {exc}")
        return item

    def __len__(self) -> int:
        return len(self.iterator)

    def __getattr__(self, name: str) -> object:
        return getattr(self.iterator, name)


class WrappedLoader:
    """The loader, iterated through a timed iterator; every other attribute is the loader's own."""

    def __init__(self, loader: object):
        self._loader = loader

    def __iter__(self) -> _TimedIterator:
        started = time.time()
        iterator = iter(self._loader)
        workers = _worker_pids(iterator)
        try:
            record("DataLoaderIterInitialize", "DataLoaderIterInitialize", started, time.time(),
                   {"num_workers": _setting(self._loader, "num_workers"),
                    "pin_memory": _setting(self._loader, "pin_memory"), "worker_pids": workers})
        except Exception as exc:  # never into training
            log_once("loader", f"wrap(loader) failed to record: {type(exc).__name__}: {exc}")
        return _TimedIterator(iterator, workers)

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> object:
        return getattr(self._loader, name)


def wrap(loader: object) -> WrappedLoader:
    """``for batch in sampler.wrap(loader):`` records the time blocked waiting for each batch (see module doc)."""
    return loader if isinstance(loader, WrappedLoader) else WrappedLoader(loader)
