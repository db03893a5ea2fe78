"""Property tests (hypothesis, CPU) of index_shuffling's invariants for any scores (ties
included), expert range and valid-token count: the counts sum to the kept picks, the kept
(token, expert) pairs are a permutation of the routing slots grouped by expert, and each token's
experts are its top-k scores (ties: lower expert index first)."""

import pytest
import torch

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

import mslk.moe as moe  # noqa: E402

PROPERTY = settings(max_examples=25, deadline=None, derandomize=True, database=None)


@st.composite
def routing_cases(draw):
    E = draw(st.sampled_from([1, 3, 16, 32, 128, 320]))
    top_k = draw(st.integers(1, min(8, E)))
    T = draw(st.integers(0, 40))
    start = draw(st.integers(0, E - 1))
    end = draw(st.integers(start + 1, E))
    full_range = draw(st.booleans())
    valid = draw(st.one_of(st.none(), st.integers(0, T + 2)))
    levels = draw(st.sampled_from([3, 1000]))  # 3 distinct values: ties everywhere
    dtype = draw(st.sampled_from([torch.float32, torch.bfloat16]))
    seed = draw(st.integers(0, 2**31 - 1))
    return E, top_k, T, (None, None) if full_range else (start, end), valid, levels, dtype, seed


@PROPERTY
@given(case=routing_cases())
def test_index_shuffling_invariants(case):
    E, top_k, T, (start, end), valid, levels, dtype, seed = case
    g = torch.Generator().manual_seed(seed)
    scores = (torch.randint(0, levels, (T, E), generator=g).float() / levels).to(dtype)
    vt = None if valid is None else torch.tensor([valid], dtype=torch.int32)
    counts, ei, ti = moe.index_shuffling(scores, start, end, vt, top_k)
    lo, hi = (0, E) if start is None else (start, end)
    n_valid = T if valid is None else min(valid, T)

    assert counts.dtype == ei.dtype == ti.dtype == torch.int32
    assert counts.shape == (E + 2,) and ei.shape == ti.shape == (T * top_k,)
    c = counts.tolist()
    kept = c[E + 1]
    assert c[E] == T and sum(c[:E]) == kept
    assert all(x == 0 for x in c[:lo] + c[hi:E])
    assert (ei[kept:] == 0).all() and (ti[kept:] == 0).all()

    # Grouped by expert (local ids), ascending tokens inside a segment; counts give the segments.
    eis, tis = ei[:kept].tolist(), ti[:kept].tolist()
    assert eis == sorted(eis) and all(0 <= e < hi - lo for e in eis)
    pos = 0
    for e in range(lo, hi):
        seg = tis[pos:pos + c[e]]
        assert seg == sorted(seg) and all(x == e - lo for x in eis[pos:pos + c[e]])
        pos += c[e]
    # Every kept pair is distinct, from a valid token; with the full range each valid token has
    # exactly top_k experts (the picks are a permutation of the n_valid * top_k routing slots).
    pairs = list(zip(tis, eis))
    assert len(set(pairs)) == kept and all(0 <= t < n_valid for t in tis)
    picks = {}
    for t, e in pairs:
        picks.setdefault(t, []).append(e + lo)
    if start is None:
        assert kept == n_valid * top_k and all(len(v) == top_k for v in picks.values())
    # Each token's picks are its top_k experts (larger score first, equal scores: lower expert
    # index first), those inside the range kept.
    s = scores.float()
    for t in range(n_valid):
        order = sorted(range(E), key=lambda e: (-s[t, e].item(), e))[:top_k]
        assert sorted(picks.get(t, [])) == sorted(e for e in order if lo <= e < hi)
