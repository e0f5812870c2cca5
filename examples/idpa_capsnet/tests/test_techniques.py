"""Every registered technique over the family's example model, as reportgen's own contract
table runs them (reportgen.sdk.testing.technique_table): where it applies it computes from only
what it declared, renders and summarises; where it does not, it says why in one plain clause.
Pose-only capsules have no activations: the analyses of activations say so."""

from __future__ import annotations

def test_every_technique_applies_or_says_why_not():
    from reportgen.sdk.testing import technique_table

    rows = {row.technique: row for row in technique_table("idpa")}
    for row in rows.values():
        print(row.technique, "applies" if row.applies else f"n/a: {row.reason}",
              row.problem[:200])
    broken = {name: row.problem for name, row in rows.items() if not row.ok}
    assert not broken, broken
    applies = {name for name, row in rows.items() if row.applies}
    # what reads the class poses, the convolutions and the routing weights applies
    assert {"predictions", "class_capsules", "routing_weights", "routing_entropy",
            "conv_feature_maps", "gradcam_pp", "vote_agreement",
            "adversarial_robustness"} <= applies
    # what reads activations does not: the capsules are poses only
    for name in ("primary_heatmaps", "dead_units", "rpv"):
        assert not rows[name].applies and "poses only" in rows[name].reason, name
    assert not rows["live_decoder"].applies                  # no decoder
