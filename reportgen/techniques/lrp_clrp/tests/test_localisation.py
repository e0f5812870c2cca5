"""Pointing game, energy-thresholded pointing, relevance mass accuracy and the patch ablation on
hand-made maps and masks whose answers are counted by hand."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.techniques.lrp_clrp import localisation as loc


def square_mask(shape=(5, 5), rows=slice(1, 3), cols=slice(1, 3)):
    mask = np.zeros(shape, bool)
    mask[rows, cols] = True
    return mask


def test_pointing_game_hits_misses_and_constant_maps():
    mask = square_mask()
    inside = np.zeros((5, 5))
    inside[2, 1] = 3.0
    outside = np.zeros((5, 5))
    outside[4, 4] = 1.0
    constant = np.full((5, 5), 0.7)
    tie = np.zeros((5, 5))
    tie[0, 0] = tie[2, 2] = 1.0                  # first maximum (row-major) is outside
    hits = loc.pointing_game(np.stack([inside, outside, constant, tie]), np.stack([mask] * 4))
    np.testing.assert_array_equal(hits, [1.0, 0.0, 0.0, 0.0])


def test_pointing_game_tolerance_and_empty_mask():
    mask = square_mask()                          # rows 1-2, cols 1-2
    near = np.zeros((5, 5))
    near[2, 4] = 1.0                              # 2 pixels right of column 2
    hits = [loc.pointing_game(near[None], mask[None], tolerance=t)[0] for t in (0, 1, 2)]
    assert hits == [0.0, 0.0, 1.0]
    empty = loc.pointing_game(near[None], np.zeros((1, 5, 5), bool))
    assert np.isnan(empty[0])
    with pytest.raises(ValueError, match="boolean"):
        loc.pointing_game(near[None], mask[None].astype(int))


def test_relevance_mass_accuracy_counts_positive_relevance_only():
    mask = square_mask()
    relevance = np.zeros((5, 5))
    relevance[1, 1], relevance[2, 2] = 2.0, 1.0   # inside: 3
    relevance[0, 4] = 1.0                         # outside: 1
    relevance[4, 0] = -5.0                        # negative: ignored
    got = loc.relevance_mass_accuracy(np.stack([relevance, -np.ones((5, 5))]),
                                      np.stack([mask, mask]))
    np.testing.assert_allclose(got[0], 0.75)
    assert np.isnan(got[1])


def test_energy_thresholded_pointing():
    """Positive relevance 4 (in), 3 (out), 2 (in), 1 (out); total 10. A pixel is kept while
    the relevance above it is below the threshold: 50% (5): above = 0, 4 -> pixels 4 and 3,
    1 of 2 inside; 90% (9): above = 0, 4, 7 -> 4, 3, 2, 2 of 3; 100%: all four, 2 of 4."""
    mask = square_mask()
    relevance = np.zeros((5, 5))
    relevance[1, 1], relevance[0, 0], relevance[2, 2], relevance[4, 4] = 4, 3, 2, 1
    relevance[3, 3] = -2
    maps, masks = relevance[None], mask[None]
    np.testing.assert_allclose(loc.energy_pointing(maps, masks, 0.5), [0.5])
    np.testing.assert_allclose(loc.energy_pointing(maps, masks, 0.9), [2 / 3])
    np.testing.assert_allclose(loc.energy_pointing(maps, masks, 1.0), [0.5])
    kept = loc.energy_kept(maps, 0.5)[0]
    assert kept.sum() == 2 and kept[1, 1] and kept[0, 0]
    assert np.isnan(loc.energy_pointing(-np.ones((1, 5, 5)), masks, 0.5)[0])


def test_patch_masks_are_shifted_inside():
    masks = loc.patch_masks([0, 5, 9], [0, 5, 9], (10, 10), 3)
    assert (masks.sum(axis=(1, 2)) == 9).all()
    assert masks[0, :3, :3].all() and masks[1, 4:7, 4:7].all() and masks[2, 7:, 7:].all()
    assert loc.patch_masks([1], [1], (2, 2), 9).all()      # larger than the image: all of it


def test_ablation_drop_of_a_linear_score():
    """score = (sum of pixels, -sum): ablating the 3x3 patch around the maximum with a fill
    of 0 drops class 0's score by the patch's sum."""
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 1, (4, 8, 8, 1))
    maps = rng.uniform(0, 1, (4, 8, 8))

    def score(x):
        total = x.reshape(len(x), -1).sum(axis=1)
        return np.stack([total, -total], axis=1)

    out = loc.ablation_drop(score, images, maps, [0, 0, 1, 1], np.zeros((8, 8, 1)), size=3,
                            rng=np.random.default_rng(1))
    rows, cols, _ = loc.maximum_position(maps)
    patches = loc.patch_masks(rows, cols, (8, 8), 3)
    removed = (images[..., 0] * patches).sum(axis=(1, 2))
    np.testing.assert_allclose(out["drop"], removed * np.array([1, 1, -1, -1]))
    assert out["random_drop"].shape == (4,) and out["pointed"].all()
    # the fill replaces exactly the patch
    ablated = loc.ablate(images, patches, np.full((8, 8, 1), 0.5))
    np.testing.assert_array_equal(ablated[patches], 0.5)
    np.testing.assert_array_equal(ablated[~patches], images[~patches])
