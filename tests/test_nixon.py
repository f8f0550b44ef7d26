"""``--compat nixon`` against a transcription of Nixon et al.'s reference code.

The reference below follows ``GeneralCalibrationError.update_state`` and
``get_calibration_error`` of google/uncertainty-metrics (commit c046458) statement by statement; calcheck's
implementation (calcheck/compat/nixon.py) is
vectorized differently and must agree to 1e-9.
"""

import json

import numpy as np
import pandas as pd
import pytest

from calcheck.compat import nixon
from calcheck.compat.nixon import NIXON
from calcheck.metrics import MetricOptions, MulticlassPrepared, compute_multiclass_metrics


class ReferenceGCE:
    def __init__(self, binning_scheme, max_prob, class_conditional, norm, num_bins=15,
                 threshold=0.0):
        self.binning_scheme, self.max_prob = binning_scheme, max_prob
        self.class_conditional, self.norm = class_conditional, norm
        self.num_bins, self.threshold = num_bins, threshold

    @staticmethod
    def get_adaptive_bins(predictions, num_bins):
        if np.size(predictions) == 0:
            return np.linspace(0, 1, num_bins + 1)[:-1]
        edge_indices = np.linspace(0, len(predictions), num_bins, endpoint=False)
        edge_indices = np.round(edge_indices).astype(int)
        edge_indices = np.minimum(edge_indices, len(predictions) - 1)
        edges = np.sort(predictions)[edge_indices]
        return edges[1:]

    def get_calibration_error(self, probs, labels, bin_upper_bounds, norm, num_bins):
        if np.size(probs) == 0:
            return 0.0
        bin_indices = np.digitize(probs, bin_upper_bounds)
        sums = np.bincount(bin_indices, weights=probs, minlength=num_bins).astype(np.float64)
        counts = np.bincount(bin_indices, minlength=num_bins)
        counts = counts + np.finfo(sums.dtype).eps
        confidences = sums / counts
        accuracies = np.bincount(bin_indices, weights=labels, minlength=num_bins) / counts
        errors = accuracies - confidences
        normed = errors if norm == "l1" else np.square(errors)
        weighting = counts / float(len(probs.flatten()))
        return np.sum(np.abs(normed * weighting))

    def update_state(self, labels, probs):
        num_classes = probs.shape[1]
        labels_matrix = np.eye(num_classes)[labels]
        if not self.class_conditional:
            if self.max_prob:
                labels_matrix = labels_matrix[range(len(probs)), np.argmax(probs, axis=1)]
                probs = probs[range(len(probs)), np.argmax(probs, axis=1)]
            labels_matrix = labels_matrix[probs > self.threshold]
            probs = probs[probs > self.threshold]
            if self.binning_scheme == "adaptive":
                upper = self.get_adaptive_bins(probs, self.num_bins)
            else:
                upper = np.histogram_bin_edges([], bins=self.num_bins, range=(0.0, 1.0))[1:]
            err = self.get_calibration_error(probs.flatten(), labels_matrix.flatten(), upper,
                                             self.norm, self.num_bins)
        else:
            errs = []
            for j in range(num_classes):
                if not self.max_prob:
                    probs_slice = probs[:, j]
                    labels = labels_matrix[:, j]
                else:
                    sel = np.argmax(probs, axis=1) == j
                    labels = labels_matrix[sel][:, j]
                    probs_slice = probs[sel][:, j]
                labels = labels[probs_slice > self.threshold]
                probs_slice = probs_slice[probs_slice > self.threshold]
                if self.binning_scheme == "adaptive":
                    upper = self.get_adaptive_bins(probs_slice, self.num_bins)
                else:
                    upper = np.histogram_bin_edges([], bins=self.num_bins, range=(0.0, 1.0))[1:]
                errs.append(self.get_calibration_error(probs_slice, labels, upper, self.norm,
                                                       self.num_bins) / num_classes)
            err = np.sum(errs)
        if self.norm == "l2":
            err = np.sqrt(err)
        return err


def reference(mid, probs, labels, bins=15, tace_threshold=0.01):
    cfg = NIXON[mid]
    return ReferenceGCE(cfg["scheme"], cfg["max_prob"], cfg["class_conditional"], "l1", bins,
                        tace_threshold if mid == "tace" else 0.0).update_state(labels, probs)


def cases():
    rng = np.random.default_rng(0)
    out = {}
    # quantized to multiples of 1/15 and 1/10: many values exactly on bin edges
    q = rng.integers(0, 11, size=(400, 4)).astype(float)
    q[q.sum(axis=1) == 0, 0] = 1
    out["quantized_tenths"] = q / q.sum(axis=1, keepdims=True)
    e = np.round(rng.dirichlet(np.ones(3), size=300) * 15) / 15
    e[:, 2] = 1 - e[:, 0] - e[:, 1]
    out["fifteenths"] = np.clip(e, 0, 1)
    # exact zeros and ones
    z = rng.dirichlet(np.ones(5) * 0.3, size=300)
    z[:40] = np.eye(5)[rng.integers(0, 5, 40)]
    out["zeros_and_ones"] = z
    # argmax ties
    t = rng.dirichlet(np.ones(4), size=300)
    t[:60, :2] = t[:60, :2].sum(axis=1, keepdims=True) / 2
    out["argmax_ties"] = t
    # a class that never reaches the TACE threshold
    c = rng.dirichlet(np.ones(4), size=300)
    c[:, 3] = 0.004
    c[:, :3] *= (1 - 0.004) / c[:, :3].sum(axis=1, keepdims=True)
    out["class_below_threshold"] = c
    return {k: (v, (rng.uniform(size=v.shape[0])[:, None] > np.cumsum(v, axis=1)).sum(axis=1)
                .clip(0, v.shape[1] - 1)) for k, v in out.items()}


CASES = cases()


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("mid", list(NIXON))
@pytest.mark.parametrize("bins", [15, 10, 7])
def test_compat_nixon_equals_reference(case, mid, bins):
    p, y = CASES[case]
    got = getattr(nixon, mid)(p, y, bins)
    assert got.value == pytest.approx(reference(mid, p, y, bins), abs=1e-9, rel=0)
    assert got.settings["convention"] == "nixon" and got.settings["compat"] == "nixon"


def test_l2_norm_and_max_prob_class_conditional_transcribed():
    from calcheck.compat.nixon import gce

    p, y = CASES["zeros_and_ones"]
    for scheme in ("even", "adaptive"):
        for cc in (False, True):
            for mp in (False, True):
                ref = ReferenceGCE(scheme, mp, cc, "l2", 15, 0.0).update_state(y, p)
                assert gce(p, y, scheme=scheme, max_prob=mp, class_conditional=cc,
                           norm="l2")[0] == pytest.approx(ref, abs=1e-12)


def test_defaults_differ_from_nixon_on_an_example():
    # documented in docs/multiclass.md: probability exactly 1.0 and exact zeros
    p = np.array([[1.0, 0.0], [0.7, 0.3], [0.3, 0.7], [0.6, 0.4]])
    y = np.array([0, 0, 1, 1])
    d = compute_multiclass_metrics(MulticlassPrepared(p, y), ["sce", "ace_cw"],
                                   MetricOptions(bins=2))
    nx = {m: getattr(nixon, m)(p, y, 2) for m in ("sce", "ace_cw")}
    # calcheck: class 0 err .15 (bins {.3}, {1, .7, .6}), class 1 err .15 → SCE .15
    assert d["sce"].value == pytest.approx(0.15)
    # nixon: class 1's exact 0 is dropped (p > 0) and weights are counts/3 → err .2;
    # class 0's 1.0 sits in an extra bin → err .15; SCE .175
    assert nx["sce"].value == pytest.approx(0.175)
    assert nx["sce"].value == pytest.approx(reference("sce", p, y, 2))


def test_cli_compat(cli, tmp_path):
    p, y = CASES["argmax_ties"]
    df = pd.DataFrame({f"prob_{j}": p[:, j] for j in range(p.shape[1])})
    df["label"] = y
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    r = cli(["score", path, "--compat", "nixon", "--json", "-m", "sce,tace,ece_top"])
    assert r.code == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["settings"]["convention"] == "nixon" and rep["settings"]["compat"] == "nixon"
    assert rep["metrics"]["sce"]["value"] == pytest.approx(reference("sce", p, y), abs=1e-12)
    default = json.loads(cli(["score", path, "--compat", "nixon", "--json"]).stdout)
    assert list(default["metrics"]) == ["ece_top", "ace_top", "sce", "ace_cw", "tace"]
    # a metric the reference code does not compute is an error naming what it has
    r = cli(["score", path, "--compat", "nixon", "-m", "tce_cw"])
    assert r.code == 2 and "tce_cw not available" in r.stderr and "ace_cw" in r.stderr
    bad = cli(["score", path, "--compat", "guo"])
    assert bad.code == 2 and "--compat" in bad.stderr
