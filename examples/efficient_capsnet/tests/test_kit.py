"""The family held by reportgen's testing kit (reportgen.sdk.testing), as reportgen's own
families are: its layers keep Keras's layer contract, its example model describes, counts,
builds and round-trips alike, and every registered technique over it either runs (computed
from only what it declared, rendered, summarised) or says in one clause why it does not."""

from __future__ import annotations

import numpy as np

from reportgen.sdk.testing import check_capsule_layer, check_family, technique_table


def test_its_capsule_layers_keep_the_keras_layer_contract():
    from efficient_capsnet.layers import FCCaps, PrimaryCaps

    rng = np.random.default_rng(0)
    maps = rng.normal(size=(2, 3, 3, 16)).astype(np.float32)
    poses, = check_capsule_layer(lambda: PrimaryCaps(4, 4), maps)
    assert poses.shape == (2, 36, 4)
    assert np.all(np.linalg.norm(poses, axis=-1) < 1)          # squashed
    outputs = check_capsule_layer(lambda: FCCaps(10, 8), poses)
    assert [o.shape for o in outputs] == [(2, 10, 8), (2, 36, 10), (2, 36, 10)]


def test_the_family_passes_the_family_check():
    net = check_family("efficient_capsnet")
    assert net.description.head.readout == "length" and net.description.head.scores == "lengths"


def test_every_technique_runs_or_says_why_not():
    rows = {row.technique: row for row in technique_table("efficient_capsnet")}
    assert all(row.ok for row in rows.values()), {n: r.problem for n, r in rows.items()
                                                  if not r.ok}
    assert rows["self_attention_coupling"].applies and rows["self_attention_coupling"].rendered
    # a 1x1 primary grid makes no map: said, not drawn
    assert rows["rpv"].reason == "it has no capsule grid of more than one cell"
    assert rows["adversarial_robustness"].summarised == 1


def test_the_family_declares_its_own_squash():
    """Techniques that squash for the family (the vote attack) use Efficient-CapsNet's
    (1 - e^-|s|) s/|s| (Mazzia et al. 2021, eq. 2), not Sabour et al.'s."""
    from numpy_oracle import squash as oracle_squash

    from efficient_capsnet.family import FAMILY

    s = np.random.default_rng(3).normal(0, 2, (5, 10, 8)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(FAMILY.squash(s)), oracle_squash(s),
                               rtol=1e-5, atol=1e-6)
