"""Plug-ins: workloads and backends from outside the tree, named in ``$ROOFBENCH_PLUGINS``.

``ROOFBENCH_PLUGINS=mod1,mod2`` names modules importable on the Python path. A module that
defines ``WORKLOAD`` (a :class:`roofbench.kernels.spec.Workload`) adds a workload; one that
defines ``BACKEND`` (a ``roofbench.bench.backends.base.Backend`` subclass) adds a backend; one
module may define both. The workload registry and the backend registry each read the
attribute they know, so this module stays below both (kernels never import bench).
A plug-in that does not import or defines neither is a :class:`PluginError`: one line, which
the command line prints as an error with exit code 2.
"""

from __future__ import annotations

import importlib
import os
from functools import cache
from types import ModuleType

from .boundary import Refusal
from .errors_text import first_line

ENV = "ROOFBENCH_PLUGINS"


class PluginError(Refusal):
    """A plug-in named in $ROOFBENCH_PLUGINS cannot be used (message: one line, exit 2)."""


def plugin_names() -> tuple[str, ...]:
    """The module names in $ROOFBENCH_PLUGINS, in order (read on every call: a test or a
    caller may change the variable within a process)."""
    return tuple(n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip())


def plugin_modules() -> tuple[ModuleType, ...]:
    return tuple(_load(name) for name in plugin_names())


def plugin_attr(attr: str) -> list[tuple[str, object]]:
    """(module name, value) of every plug-in that defines ``attr`` ("WORKLOAD", "BACKEND")."""
    return [(m.__name__, getattr(m, attr)) for m in plugin_modules() if hasattr(m, attr)]


class _OsExit(BaseException):
    """os._exit called by a plug-in while it is imported (raised instead of exiting)."""


def _no_os_exit(code: int) -> None:
    raise _OsExit(code)


@cache
def _load(name: str) -> ModuleType:
    real_exit = os._exit
    os._exit = _no_os_exit  # type: ignore[assignment]  # only while the plug-in imports
    try:
        mod = importlib.import_module(name)
    except _OsExit as e:  # os._exit() would end roofbench at once, without a word
        raise PluginError(f"plug-in {name!r} (from ${ENV}) called os._exit({e.args[0]!r}) "
                          "on import") from None
    except SystemExit as e:  # sys.exit() on import would end roofbench without a word
        raise PluginError(f"plug-in {name!r} (from ${ENV}) called sys.exit({e.code!r}) "
                          "on import") from None
    except Exception as e:  # any failure of third-party code is the plug-in's, said in a line
        raise PluginError(f"plug-in {name!r} (from ${ENV}) does not import: "
                          f"{first_line(e)}") from None
    finally:
        os._exit = real_exit
    if not hasattr(mod, "WORKLOAD") and not hasattr(mod, "BACKEND"):
        raise PluginError(f"plug-in {name!r} (from ${ENV}) defines neither WORKLOAD nor BACKEND")
    return mod
