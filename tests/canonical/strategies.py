"""Hypothesis strategies the canonical package's tests share."""

from __future__ import annotations

from hypothesis import strategies as st

# Any JSON value orjson or the standard library may have to write: integers beyond 64 bits,
# floats of every form, any text.
any_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
