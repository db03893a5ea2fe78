"""Independent oracles for the attention tests: masks built element by element from the contract
(CONTRACTS.md, "Masks"), and attention in float64 with an explicit softmax."""

import math

import torch


def causal_tl(i, j, mq, mkv):
    return j <= i


def causal_br(i, j, mq, mkv):
    return j - i <= mkv - mq


def causal_local(w, bottom_right):
    def f(i, j, mq, mkv):
        shift = (mkv - mq) if bottom_right else 0
        return shift - w + 1 <= j - i <= shift

    return f


def local_br(wl, wr):
    def f(i, j, mq, mkv):
        s = mq - mkv
        return i - wl <= j + s <= i + wr

    return f


def everything(i, j, mq, mkv):
    return True


def dense_mask(pred, mq, mkv):
    m = torch.full((mq, mkv), -math.inf, dtype=torch.float64)
    for i in range(mq):
        for j in range(mkv):
            if pred(i, j, mq, mkv):
                m[i, j] = 0.0
    return m


def blocks_mask(pred, q_lens, kv_lanes, total_kv):
    """kv_lanes[b] = list of physical key indices of lane b, in logical order."""
    total_q = sum(q_lens)
    m = torch.full((total_q, total_kv), -math.inf, dtype=torch.float64)
    q0 = 0
    for lq, lane in zip(q_lens, kv_lanes):
        for i in range(lq):
            for jj, phys in enumerate(lane):
                if pred(i, jj, lq, len(lane)):
                    m[q0 + i, phys] = 0.0
        q0 += lq
    return m


def packed_lanes(kv_lens):
    lanes, s = [], 0
    for x in kv_lens:
        lanes.append(list(range(s, s + x)))
        s += x
    return lanes, s


def padded_lanes(kv_lens, padding):
    return [list(range(b * padding, b * padding + x)) for b, x in enumerate(kv_lens)], len(kv_lens) * padding


def gappy_lanes(starts, kv_lens):
    return [list(range(s, s + x)) for s, x in zip(starts, kv_lens)], starts[-1]


def paged_lanes(offsets, kv_lens, block_tables, page_size):
    lanes = []
    for b, (o, x) in enumerate(zip(offsets, kv_lens)):
        lane = []
        for p in range(o, o + x):
            lane.append(int(block_tables[b][p // page_size]) * page_size + p % page_size)
        lanes.append(lane)
    return lanes


def attention_f64(q, k, v, bias=None, scale=None):
    """q [B, M, H, K], k [B, N, H, K], v [B, N, H, Kv]; bias broadcastable to [B, H, M, N].
    Returns out [B, M, H, Kv] and lse [B, H, M] in float64; fully masked rows: out 0, lse -inf."""
    q, k, v = q.double(), k.double(), v.double()
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = torch.einsum("bmhk,bnhk->bhmn", q, k) * scale
    if bias is not None:
        s = s + bias.double()
    mx = s.amax(dim=-1, keepdim=True) if s.shape[-1] else torch.full((*s.shape[:-1], 1), -math.inf, dtype=s.dtype)
    mx = torch.where(torch.isinf(mx) & (mx < 0), torch.zeros_like(mx), mx)
    e = torch.exp(s - mx)
    denom = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(denom == 0, torch.ones_like(denom), denom)
    out = torch.einsum("bhmn,bnhk->bmhk", p, v)
    lse = (torch.log(denom) + mx).squeeze(-1)
    return out, lse


def paginate(x, tables, page):
    """Padded lanes [1, B * P, ...] (P = tables.shape[1] * page) laid out as the physical pages of
    tables (pages no table names stay zero)."""
    out = torch.zeros_like(x)
    P = tables.shape[1] * page
    for b in range(tables.shape[0]):
        for j in range(tables.shape[1]):
            phys = int(tables[b, j])
            out[:, phys * page:(phys + 1) * page] = x[:, b * P + j * page:b * P + (j + 1) * page]
    return out
