import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calcheck.pava import pava_bc_bounds, pava_bc_weights, pava_bounds


def pava_bc_reference(y, n_min, n_max):
    """Row-by-row transcription of the authors' PAVA-BC (docs/metrics.md), the test oracle."""
    n = len(y)
    blocks = []  # [sum, weight]
    for i in range(n - n_min):
        blocks.append([int(y[i]), 1])
        while len(blocks) > 1:
            (s1, w1), (s2, w2) = blocks[-2], blocks[-1]
            if w1 + w2 <= n_min or (w1 + w2 <= n_max and s1 / w1 >= s2 / w2):
                blocks[-2] = [s1 + s2, w1 + w2]
                blocks.pop()
            else:
                break
    if n_min > 0 and n > 0:
        tail = [int(np.sum(y[n - n_min:])), min(n_min, n)]
        if blocks and 2 * n_min <= n_max:
            blocks[-1] = [blocks[-1][0] + tail[0], blocks[-1][1] + tail[1]]
        else:
            blocks.append(tail)
    return [w for _, w in blocks]


labels_st = st.lists(st.integers(0, 1), min_size=1, max_size=400)


@given(labels_st, st.integers(0, 60), st.integers(0, 200))
def test_pava_bc_equals_row_by_row_reference(y, n_min, extra):
    y = np.array(y)
    n_min = min(n_min, len(y))
    n_max = n_min + extra
    assert pava_bc_weights(y, n_min, n_max) == pava_bc_reference(y, n_min, n_max)


@given(st.integers(20, 3000), st.floats(0.0, 1.0), st.integers(0, 2**31))
def test_pava_bc_defaults_on_model_like_labels(n, sharp, seed):
    rng = np.random.default_rng(seed)
    s = np.sort(rng.uniform(size=n))
    y = (rng.uniform(size=n) < s ** (1 + 3 * sharp)).astype(np.int64)
    n_min, n_max = n // 20, n // 5
    w = pava_bc_weights(y, n_min, n_max)
    assert w == pava_bc_reference(y, n_min, n_max)
    assert sum(w) == n
    # blocks respect n_min everywhere and n_max except the merged tail (authors' code)
    assert all(x >= n_min for x in w)
    assert all(x <= n_max for x in w[:-1])


@given(labels_st)
def test_pava_blocks_are_monotone_and_pooled(y):
    y = np.array(y)
    b = pava_bounds(y)
    sums = np.add.reduceat(y, b[:-1])
    means = sums / np.diff(b)
    assert np.all(np.diff(means) > 0)  # strictly increasing: equal means are pooled
    assert pava_bc_weights(y, 0, len(y) + 1) == pava_bc_reference(y, 0, len(y) + 1)


def test_pava_hand_example():
    # 0 1 0 1 1 0 -> isotonic fit 0, .5, .5, 2/3, 2/3, 2/3
    assert pava_bounds(np.array([0, 1, 0, 1, 1, 0])).tolist() == [0, 1, 3, 6]


def test_invalid_sizes():
    with pytest.raises(ValueError):
        pava_bc_bounds(np.array([0, 1]), 3, 2)


def test_the_compiled_scan_runs_where_numba_is_installed():
    pytest.importorskip("numba")
    from calcheck.pava import COMPILE_AT, compiled_pava

    assert compiled_pava(COMPILE_AT) is not None


def test_a_scan_of_few_runs_keeps_the_loop():
    """numba's scan loads for COMPILE_AT rows unless they hold fewer than FEW_RUNS runs of one
    label (rare positives): then the loop scans them, until the loop's runs add up to
    COMPILE_AT (fresh interpreters: the load is once a process)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("numba")
    code = ("import sys\n"
            "from calcheck.pava import COMPILE_AT, FEW_RUNS, compiled_pava\n"
            "out = []\n"
            "for runs in map(int, sys.argv[1:]):\n"
            "    out.append(compiled_pava(10 * COMPILE_AT, runs) is not None)\n"
            "print(out)\n")
    from calcheck.pava import COMPILE_AT, FEW_RUNS

    for runs, want in (([FEW_RUNS - 1], [False]), ([FEW_RUNS], [True]),
                       ([FEW_RUNS - 1] * 4, [False, False, False, True])):
        out = subprocess.run([sys.executable, "-c", code, *map(str, runs)], capture_output=True,
                             text=True, check=True, env={**os.environ, "CALCHECK_NO_NUMBA": ""})
        assert out.stdout.strip() == str(want), (runs, out.stderr)
    assert 3 * (FEW_RUNS - 1) < COMPILE_AT <= 4 * (FEW_RUNS - 1)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=300), st.integers(1, 5),
       st.integers(0, 40), st.integers(0, 120), st.booleans())
def test_compiled_and_python_scans_agree(scores, coarse, n_min, extra, shared):
    """The same block sizes from numba's scan and the Python loop: 0/1 labels (integers) and
    tie-group mean labels (floats)."""
    pytest.importorskip("numba")
    from calcheck import binning, pava

    pava.compiled_pava(pava.COMPILE_AT)              # loaded: every scan is compiled now
    s = np.sort(np.round(np.array(scores), coarse))
    y = (np.random.default_rng(len(scores) + n_min).uniform(size=s.size) < s).astype(np.int64)
    n_min = min(n_min, len(y))
    labels = binning.shared_labels(s, y) if shared else y
    compiled = pava.pava_bc_weights(labels, n_min, n_min + extra)
    python = pava.pava_bc_runs(*pava.label_runs(labels), n_min, n_min + extra)
    assert compiled == python


@given(st.lists(st.floats(0, 1), min_size=2, max_size=300), st.integers(2, 5),
       st.integers(0, 40), st.integers(0, 120))
def test_compiled_scan_over_runs_agrees_with_the_loop(scores, coarse, n_min, extra):
    """Runs handed over as arrays (:func:`shared_label_runs`: rare positives with tied
    scores) give numba's scan the loop's block sizes."""
    pytest.importorskip("numba")
    from calcheck import binning, pava

    pava.compiled_pava(pava.COMPILE_AT)              # loaded: every scan is compiled now
    s = np.sort(np.round(np.array(scores), coarse))
    y = (np.random.default_rng(len(scores) + n_min).uniform(size=s.size) < 0.02).astype(np.int8)
    runs = pava.shared_label_runs(s, y)
    if runs is None:
        return
    n_min = min(n_min, len(y))
    values, lengths = runs
    loop = pava.pava_bc_runs(*pava.label_runs(binning.shared_labels(s, y)), n_min,
                             n_min + extra)
    assert pava.pava_bc_run_weights(values, lengths, n_min, n_min + extra) == loop


def test_the_compiled_scan_loads_without_scipy_linalg():
    """numba's first load imports numba.np.arraymath, whose BLAS check imports scipy.linalg
    (~0.19 s); the scan's module answers that check from scipy's files for that import only:
    scipy.linalg stays unloaded, numba's BLAS flag is what its own check gives, and its own
    check is back in place afterwards."""
    import subprocess
    import sys

    pytest.importorskip("numba")
    code = (
        "import sys, numpy as np\n"
        "from calcheck import _pava_compiled as pc\n"
        "pc.pava_bc_runs_kernel(np.zeros(2, dtype=np.int8), np.zeros(0, dtype=np.int64), 1, 2,"
        " True, np.zeros(1, dtype=np.int64))\n"
        "print('scipy.linalg' in sys.modules)\n"
        "import numba.np.arraymath as am, numba.np.linalg as nl\n"
        "print(am._HAVE_BLAS, am.ensure_blas is nl.ensure_blas,"
        " nl.ensure_blas.__module__ == 'numba.np.linalg')\n"
        "nl.ensure_blas()\n"
        "print('scipy.linalg' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True", "True", "True", "True"], out
