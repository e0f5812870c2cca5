"""A data set whose labels per image (one class, or a pair for MultiMNIST) do not fit the model
is refused in one line (reportgen.data.label_arity)."""

from __future__ import annotations

import numpy as np
import pytest

from reportgen.data.datasets import Dataset
from reportgen.data.label_arity import PAIR, SINGLE, check_label_arity, label_arity
from reportgen.errors import ReportgenError

PAIRS = np.array([[0, 1], [2, 3], [3, 0], [1, 2]])


def _dataset(name, y):
    x = np.zeros((len(y), 4, 4, 1), np.float32)
    return Dataset(name=name, x_train=x, y_train=y, x_test=x, y_test=y,
                   class_names=tuple("0123"), source="tiny")


def test_label_arity_reads_the_label_shape():
    assert label_arity(np.zeros(5, np.int64)) == SINGLE
    assert label_arity(np.zeros((5, 2), np.int64)) == PAIR
    with pytest.raises(ReportgenError, match=r"shape \(5, 3\)"):
        label_arity(np.zeros((5, 3), np.int64))


def test_single_label_data_for_a_pair_model_is_refused_in_one_line():
    mnist = _dataset("mnist", np.arange(4) % 4)
    with pytest.raises(ReportgenError) as caught:
        check_label_arity(mnist, "MULTIMNIST_CapsNet", PAIR)
    message = caught.value.message
    assert "\n" not in message
    assert "'mnist'" in message and "MULTIMNIST_CapsNet" in message
    assert "Received labels of shape (4,)" in message and "(N, 2)" in message
    assert "Fix: train MULTIMNIST_CapsNet with --data multimnist" in message
    check_label_arity(mnist, "MNIST_Demo", SINGLE)                    # fits: no error


def test_pair_data_for_a_single_label_model_is_refused_in_one_line():
    multi = _dataset("multimnist", PAIRS)
    with pytest.raises(ReportgenError) as caught:
        check_label_arity(multi, "MNIST_Demo", SINGLE)
    message = caught.value.message
    assert "\n" not in message
    assert "'multimnist' has two classes per image" in message and "MNIST_Demo" in message
    assert "Received labels of shape (4, 2)" in message and "Fix: give MNIST_Demo" in message
    check_label_arity(multi, "MULTIMNIST_CapsNet", PAIR)
