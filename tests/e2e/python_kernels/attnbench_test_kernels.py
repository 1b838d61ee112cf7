"""Python kernels that go wrong on purpose, for tests/e2e/test_user_kernels.cpp."""

_TABLE = dict(dtypes=["fp32"], masks=["none", "causal"])


def raises(q, k, v, out, problem):
    raise ValueError("planted failure")


raises.attnbench = dict(_TABLE, summary="raises on every call")


def wrong_shape(q, k, v, out, problem):
    return q[:, :, :1, :].copy()  # one head where attnbench wants heads_q


wrong_shape.attnbench = dict(_TABLE, summary="returns an output with one head")


def no_table(q, k, v, out, problem):
    out[...] = 0


def bad_table(q, k, v, out, problem):
    out[...] = 0


bad_table.attnbench = dict(dtypes=["fp32"], masks=["diagonal"])
