"""Generator methods behind one harness (``harness.Run``) and one registry.

``METHODS`` maps a method's name to ``module:class`` (imported on use, so a method's
dependencies load only when it runs) and to the config class its JSON files are read into.
Configs live in ``datalens_lib/configs/<method>/<dataset>-eps<e>.json`` (DataLens's in
``configs/`` itself), each with ``smoke``, ``cpu`` and ``paper`` profiles.
"""

from __future__ import annotations

import importlib
from typing import Any

METHODS: dict[str, str] = {
    "datalens": "datalens_lib.datalens:DataLens",
    "dcgan": "datalens_lib.methods.dcgan:DCGAN",
    "gpate": "datalens_lib.methods.gpate:GPATE",
    "dpgan": "datalens_lib.methods.dpgan:DPGAN",
}


def method_class(name: str) -> Any:
    """The class registered as ``name``; a clear error naming the valid choices."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; available: {', '.join(METHODS)}")
    module, cls = METHODS[name].split(":")
    return getattr(importlib.import_module(module), cls)
