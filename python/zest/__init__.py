"""Zest from Python: train a PyTorch model sharded across ranks with one
call (`zest.train`), or from the shell with `scripts/zest train`.

See docs/UserGuide.md."""


from .tools import LaunchError  # noqa: F401


def train(*args, **kwargs):
    """See zest.api.train."""
    from .api import train as _train

    return _train(*args, **kwargs)
