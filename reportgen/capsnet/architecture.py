"""Build the Keras model of any ModelParams: its family (reportgen.settings.families) builds a
reportgen.capsnet.network.Network from the model's description, so that `net.description` —
what techniques and renderers read — is what was built. Analyses never guess a layer's kind
from its name or read private Keras attributes.
"""

from __future__ import annotations

from reportgen.capsnet.network import Network
from reportgen.settings.families import family_of


def build_capsnet(params) -> Network:
    """The Keras 3 model for `params`, weights freshly initialised."""
    return family_of(params).build(params)
