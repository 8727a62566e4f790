"""DVC stage `prepare`: write a fixed, stratified train/val split of scikit-learn's digits.

Usage: python -m examples.digits.prepare data/digits.npz
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(out: str = "data/digits.npz") -> None:
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)  # pixel intensities 0..16 -> 0..1
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.3, stratify=y, random_state=0)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as fh:  # np.savez on a file object: no name mangling, byte-identical reruns
        np.savez(fh, x_train=x_train, y_train=y_train.astype(np.int64), x_val=x_val, y_val=y_val.astype(np.int64))
    print(f"wrote {out}: {len(x_train)} train, {len(x_val)} val")


if __name__ == "__main__":
    main(*sys.argv[1:])
