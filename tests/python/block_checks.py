"""What several block and model test files do in the same words: token-by-token decoding, the checks on rows
of a batch run alone, a prefix and a ragged batch with junk in its padding, and a refusal with its type and
wording. The checks assert; the callers keep their own inputs."""

import numpy as np
import pytest


def decode(block, x, state=None):
    """x (B, L, d) decoded token by token from `state` (a fresh one when None), reassembled as (B, L, d);
    returns (output, state)."""
    state = block.allocate_state(x.shape[0]) if state is None else state
    return np.concatenate([block.step(x[:, t : t + 1], state) for t in range(x.shape[1])], axis=1), state


def expect_rows_alone_and_prefix(block, x, prefix=None):
    """Each row of x run alone gives the bits of its row in the batch; with `prefix`, so do the first
    `prefix` positions run alone (through __call__). Returns the batch's output."""
    full = block.forward(x)
    for i in range(x.shape[0]):
        assert block.forward(x[i : i + 1]).tobytes() == full[i : i + 1].tobytes(), i
    if prefix is not None:
        assert block(x[:, :prefix]).tobytes() == full[:, :prefix].tobytes()
    return full


def expect_ragged_equals_rows_alone(forward, x, lengths, junk=np.nan, contiguous_rows=False):
    """forward(junked, lengths=lengths), where junked is x with `junk` written past each row's length, gives
    on each row the bits of that row's first n positions run alone, and exactly +0.0 bits in the padding.
    contiguous_rows passes each row alone as a contiguous copy rather than as a view of x. Returns the
    ragged output."""
    junked = x.copy()
    for i, n in enumerate(lengths):
        junked[i, n:] = junk
    ragged = forward(junked, lengths=lengths)
    for i, n in enumerate(lengths):
        row = x[i : i + 1, :n]
        alone = forward(np.ascontiguousarray(row) if contiguous_rows else row)
        assert ragged[i : i + 1, :n].tobytes() == alone.tobytes(), (i, n)
        assert not ragged[i, n:].view(np.uint32).any(), (i, n)  # exactly +0.0 bits, not merely zero values
    return ragged


def refuses(exc_type, pattern, call):
    """call() raises exc_type with a message in which re.search finds `pattern` (pytest.raises(match=))."""
    with pytest.raises(exc_type, match=pattern):
        call()
