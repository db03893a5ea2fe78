"""Plain-torch (float64 where arithmetic happens) references of the MoE ops."""

import torch


def routing_reference(scores, top_k, start, end, valid=None):
    """Per-token torch.topk picks -> {expert: sorted list of tokens} for experts in [start, end)."""
    T = scores.shape[0]
    valid = T if valid is None else min(max(valid, 0), T)
    idx = torch.topk(scores[:valid].float().cpu(), top_k, dim=1).indices
    seg = {}
    for t in range(valid):
        for e in idx[t].tolist():
            if start <= e < end:
                seg.setdefault(e, []).append(t)
    return seg


def segments(counts, expert_indices, token_indices, E, start):
    """Split the op's outputs into {global expert: sorted tokens}, checking expert ids."""
    counts = counts.cpu().tolist()
    ei, ti = expert_indices.cpu().tolist(), token_indices.cpu().tolist()
    seg, pos = {}, 0
    for e in range(E):
        n = counts[e]
        if n:
            assert all(x == e - start for x in ei[pos:pos + n]), (e, ei[pos:pos + n])
            seg[e] = sorted(ti[pos:pos + n])
        pos += n
    assert pos == counts[E + 1]
    return seg


def gather_reference(x, tok, exp, scores, n):
    tok, exp = tok[:n].long().cpu(), exp[:n].long().cpu()
    xs = x.cpu().double()[tok]
    s = scores.cpu().double()[tok, exp]
    return xs * s[:, None]


def fp8_row_reference(y, ub=None):
    """y float64 [R, D] -> dequantized float64 per the FP8 row rule (scale = clamp(amax)/448)."""
    amax = y.abs().amax(dim=1).clamp(min=1e-12) if y.shape[1] else torch.full((y.shape[0],), 1e-12, dtype=y.dtype)
    if ub is not None:
        amax = amax.clamp(max=float(ub))
    scale = (amax.float() / 448.0)
    q = (y.float() * (448.0 / amax.float())[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    return q, scale


def shuffle_reference(tokens, counts, start, end, padded, combine):
    """Row permutation of combine (rank-major -> expert-major) / split (the inverse)."""
    EP, E = counts.shape
    T = tokens.shape[0]
    c = counts.cpu().tolist()
    rm, run = {}, 0
    for r in range(EP):
        off = (T // EP) * r if padded else run
        for e in range(E):
            rm[r, e] = off
            off += c[r][e]
        run = off if not padded else run + sum(c[r])
    pairs, em = [], 0
    for e in range(start, end):
        for r in range(EP):
            pairs.append((rm[r, e], em, c[r][e]))
            em += c[r][e]
    out = torch.zeros_like(tokens.cpu())
    written = torch.zeros(T, dtype=torch.bool)
    for a, b, n in pairs:
        src, dst = (a, b) if combine else (b, a)
        out[dst:dst + n] = tokens.cpu()[src:src + n]
        written[dst:dst + n] = True
    col = [sum(c[r][e] for r in range(EP)) for e in range(start, end)]
    return out, written, torch.tensor(col + [sum(col)], dtype=counts.dtype)
