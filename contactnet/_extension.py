"""Loads the compiled ops library (contactnet._C), whose import registers torch.ops.contactnet.*."""

import importlib

_loaded = False


def load_extension() -> None:
    """Import contactnet._C once; raise an ImportError that says how to build it if it is missing."""
    global _loaded
    if _loaded:
        return
    try:
        importlib.import_module("contactnet._C")
    except ImportError as exc:
        raise ImportError(
            "contactnet's compiled ops (contactnet._C) are not built or failed to load: "
            f"{exc}. Build them against the installed torch with `make build` "
            "(or `pip install --no-build-isolation -e .`)."
        ) from exc
    _loaded = True
