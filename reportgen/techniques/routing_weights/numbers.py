"""What the routing-weight maps (reportgen.techniques.routing_weights, drawn by
reportgen.techniques.routing_weights.figures) read of a model's description: which routed layers are
drawn, the layer their weights lead into, and how the weights are told in words. Family-neutral:
everything comes from the layers' RoutingWeights (reportgen.capsnet.description).

Array keys: "maps" (B, gh, gw, parent types) the mean routing weight from each child grid cell
to each parent type (class, or capsule type of the next grid layer); "predicted" (B,) the
predicted class, as float32.
"""

from __future__ import annotations

MAPS = "maps"
PREDICTED = "predicted"


def drawn_layers(description) -> tuple:
    """The routed capsule layers (RoutingWeights.paths: the probe gives "routing:<layer>")
    whose children are on a grid, in model order: one map per layer."""
    return tuple(c for c in description.routed_layers if c.grid is not None)


def into_classes(description):
    """The drawn layer whose weights lead into the class capsules, or None."""
    layers = description.capsule_layers
    return next((c for c in drawn_layers(description)
                 if parents_are_classes(layers[layers.index(c) + 1])), None)


def layer_name(description, layer: str) -> str:
    """The layer option's layer: "" = the drawn layer routing into the class capsules (the
    primary capsules of a CapsNet); a named layer routes into a convolutional capsule layer,
    or is named explicitly."""
    if layer:
        return layer
    found = into_classes(description)
    return found.name if found is not None else ""


def layer_and_parents(description, name: str):
    """(routed layer `name`, the capsule layer its weights lead into)."""
    layers = description.capsule_layers
    index = [c.name for c in layers].index(name)
    return layers[index], layers[index + 1]


def positions_per_cell(description, name: str):
    """(gh, gw) int64: how many positions of the next layer see each child grid cell of routed
    layer `name` (1 when the parents are the classes; 0 at an edge no window reaches)."""
    from reportgen.capsnet.description import parents_per_child

    layer, after = layer_and_parents(description, name)
    gh, gw = layer.grid
    return parents_per_child(description, name).reshape(gh, gw, layer.types)[..., 0] \
        // after.types


def parents_are_classes(after) -> bool:
    """Whether the parents are the class capsules (no grid) rather than a grid layer's types."""
    return after.grid is None


def sums_words(layer, after) -> str:
    """Over which axis the weights of `layer` into `after` sum to 1, in words (a clause)."""
    w = layer.routing.symbol
    if layer.routing.sums_over == "parents":
        into = (f"the {after.types} classes" if parents_are_classes(after) else
                f"all its parents together (the {after.types} {after.name} capsule types at "
                f"every position whose window sees it)")
        return f"each {layer.name} capsule's {w}_ij sum to 1 over {into}"
    return (f"each {'class' if parents_are_classes(after) else after.name + ' capsule'}'s "
            f"{w}_ij sum to 1 over the {layer.name} capsules it receives from")


def unsuited(description) -> str | None:
    """Why a model with routing weights has none to draw here, as a plain clause, or None."""
    if drawn_layers(description):
        return None
    if description.routed_layers:
        return "its routed capsule layers are not on a spatial grid"
    words = next((c.routing.words for c in description.capsule_layers
                  if c.routing is not None), None)
    if words is None:            # no routing weights at all: the missing features say so
        return None
    return f"its {words} do not lead from each child capsule to its parents"
