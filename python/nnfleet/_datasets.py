"""Data sets nnfleet finds on this machine."""

from __future__ import annotations

import gzip

import numpy as np

from . import _core


class datasets:  # noqa: N801 (a namespace, as keras.datasets)
    """Data sets nnfleet finds on this machine."""

    @staticmethod
    def fashion_mnist(split="train"):
        """(x, y) of Fashion-MNIST's "train" (60,000) or "test" (10,000) split, from the Debian
        package dataset-fashion-mnist (or $NNFLEET_FASHION_MNIST): x uint8 [n, 28, 28, 1], y
        uint8 [n], as `nnfleet train` reads them. Raises DataError when absent."""
        images, labels = _core.fashion_mnist_files(split)

        def read(path, offset):
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rb") as f:
                return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)

        y = read(labels, 8)
        x = read(images, 16).reshape(len(y), 28, 28, 1)
        return x, y
