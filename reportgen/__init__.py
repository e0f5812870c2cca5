"""reportgen: turn trained Capsule Networks into a browsable static site.

Importing this package never imports TensorFlow; the API functions import it lazily.
"""

__version__ = "0.1.0"

from reportgen.api import analyze, load_model  # noqa: E402  (TensorFlow imported lazily inside)

__all__ = ["analyze", "load_model", "__version__"]
