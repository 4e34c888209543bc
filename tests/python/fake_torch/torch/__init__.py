"""A stand-in `torch` for python.torch_configure only: it reports a version other than the
real torch headers it points to, to check that configure refuses the pair. Never imported by
a job."""
import os
import types

__version__ = os.environ.get("FAKE_TORCH_VERSION", "2.5.0")
_C = types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=os.environ.get("FAKE_TORCH_ABI", "1") == "1")
