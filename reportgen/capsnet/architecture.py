"""Build the Keras model of any ModelParams: its family (reportgen.settings.families) builds a
reportgen.capsnet.network.Network from the model's description, so that `net.description` —
what techniques and renderers read — is what was built. Analyses never guess a layer's kind
from its name or read private Keras attributes.
"""

from __future__ import annotations

from reportgen.capsnet.network import Network
from reportgen.settings.families import family_of


def build_capsnet(params) -> Network:
    """The Keras 3 model for `params`, weights freshly initialised; held to the network
    contract (reportgen.contract.check_network: one line naming what it lacks) and to its own
    declarations on a batch (reportgen.capsnet.declarations: the encoder's scores, the routing weights'
    normalisation)."""
    from dataclasses import replace

    from reportgen.capsnet.description import describe
    from reportgen.capsnet.declarations import check_outputs
    from reportgen.contract import check_network

    family = family_of(params)
    net = family.build(params)
    # what the family declares (capabilities, outputs) is part of the network's description,
    # whichever describe the family's build called
    described = describe(params)
    if replace(net.description, capabilities=described.capabilities,
               outputs=described.outputs) == described:
        net.description = described
    check_network(net, family.name, described)
    check_outputs(net, family.name)
    return net
