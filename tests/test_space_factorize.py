"""The search's layout keys: views/space._factorize is np.unique(col, return_inverse=True) by a counting pass."""
import numpy as np

from hypothesis import given, strategies as st


@given(st.lists(st.one_of(st.integers(0, 3000), st.sampled_from([0.5, 1.0, 2.0, 0.25, 7.0]), st.integers(-5, -1)),
                max_size=60), st.booleans())
def test_factorize_is_np_unique_without_its_sort(values, as_float):
    """views/space._factorize (the search's layout keys) returns np.unique(col, return_inverse=True)."""
    from roofline.views.space import _factorize

    col = np.array(values, dtype=float if as_float or any(isinstance(v, float) for v in values) else np.int64)
    got, want = _factorize(col), np.unique(col, return_inverse=True)
    assert np.array_equal(got[0], want[0]) and np.array_equal(np.ravel(got[1]), np.ravel(want[1]))
