"""SovereignSpec: scheduler-side speculative-decoding and sovereign placement decisions for Kueue."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("sovereignspec")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+src"

CONTROLLER_NAME = "sovereignspec.io/admission"
GROUP = "sovereignspec.io"
API_VERSION = "v1alpha1"
