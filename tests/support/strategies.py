"""Hypothesis strategies shared by the sample's fuzz tests: any JSON value at all."""

from __future__ import annotations

from hypothesis import strategies as st

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.decimals(allow_nan=False, allow_infinity=False).map(str)
    | st.text(max_size=80)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
