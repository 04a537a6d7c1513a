#!/usr/bin/env python3
"""The backtest evaluation written in plain PyTorch, as a user would write it: the peer of
bench/bench_eval.cpp (same network shape, same decisions for every incoming position, the
same position resolution, PnL and metrics). Prints one JSON line per configuration.

The work per evaluation: the feature product of layer 1 once per bar, the rest of the
network for each of the 3 incoming positions, argmax, a composition scan of the per-bar
position maps (log-step doubling with gather), the per-bar returns, equity, drawdown,
trade PnL and the metrics in float64.
"""
import argparse
import json
import math
import statistics
import time

import torch


def make_inputs(bars, features, hidden, policies, device, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(bars, features, generator=g).to(device=device, dtype=dtype)
    steps = 0.01 * torch.randn(bars + 1, generator=g, dtype=torch.float64)
    close = (100.0 * torch.exp(torch.cumsum(steps, 0))).to(device)
    nets = []
    widths = [features + 3] + hidden + [3]
    for _ in range(policies):
        layers = []
        for i in range(len(widths) - 1):
            limit = math.sqrt(6.0 / widths[i]) if i < len(widths) - 2 else 1.0 / math.sqrt(widths[i])
            w = (torch.rand(widths[i], widths[i + 1], generator=g) * 2 - 1) * limit
            b = torch.zeros(widths[i + 1])
            layers.append((w.to(device=device, dtype=dtype), b.to(device=device, dtype=dtype)))
        nets.append(layers)
    return x, close, nets


def q_values(x, layers, features):
    w1, b1 = layers[0]
    z = x @ w1[:features]  # (N, H), once per bar
    h = torch.relu(z.unsqueeze(0) + w1[features:].unsqueeze(1) + b1)  # (3, N, H)
    h = h.reshape(-1, h.shape[-1])
    for w, b in layers[1:-1]:
        h = torch.relu(h @ w + b)
    w, b = layers[-1]
    return (h @ w + b).reshape(3, x.shape[0], -1)  # (incoming, N, actions)


def resolve_positions(maps, start):
    # maps: (N, 3) outgoing index per incoming index; prefix composition by doubling.
    f = maps.clone()
    n = f.shape[0]
    step = 1
    while step < n:
        later = f[step:]
        earlier = f[:-step]
        f = torch.cat([f[:step], torch.gather(later, 1, earlier)], 0)
        step *= 2
    return f[:, start]


def metrics(close, idx, table, cost, a, rf):
    p = table[idx]
    prev = torch.cat([torch.zeros(1, dtype=p.dtype, device=p.device), p[:-1]])
    move = close[1:] / close[:-1] - 1.0
    traded = (p - prev).abs()
    r = p * move - cost * traded
    n = r.numel()
    equity = torch.cumprod(1.0 + r, 0)
    peak = torch.clamp(torch.cummax(equity, 0).values, min=1.0)
    max_dd = min(0.0, (equity / peak - 1.0).min().item())
    excess = r - rf
    mean = excess.mean()
    std = excess.std(unbiased=True)
    downside = torch.sqrt((torch.clamp(excess, max=0.0) ** 2).mean())
    final = equity[-1]
    cagr = final ** (a / n) - 1.0
    flip = (p != 0) & (prev != 0) & (torch.sign(p) != torch.sign(prev))
    opens = (p != 0) & ((prev == 0) | flip)
    closes = (prev != 0) & ((p == 0) | flip)
    trade_id = torch.cumsum(opens.to(torch.int64), 0) - 1
    contribution = torch.where(p != 0, p * move - torch.where(closes, cost * p.abs(), cost * traded),
                               torch.zeros_like(p))
    held = p != 0
    sums = torch.zeros(int(opens.sum().item()) + 1, dtype=p.dtype, device=p.device)
    sums.index_add_(0, trade_id[held], contribution[held])
    close_at = torch.nonzero(closes).flatten()
    pnl = sums[trade_id[close_at - 1]] - cost * prev[close_at].abs()
    wins, losses = pnl[pnl > 0], pnl[pnl < 0]
    closed = pnl.numel()
    win_rate = wins.numel() / closed if closed else float("nan")
    return {
        "bars": n,
        "total_return": (final - 1.0).item(),
        "cagr": cagr.item(),
        "sharpe": (mean / std * math.sqrt(a)).item(),
        "sortino": (math.sqrt(a) * mean / downside).item(),
        "max_drawdown": max_dd,
        "trades_closed": closed,
        "win_rate": win_rate,
        "turnover": traded.mean().item(),
        "exposure": held.double().mean().item(),
        "total_cost": (cost * traded).sum().item(),
    }


def evaluate(x, close, layers, features, table, cost, a, rf):
    q = q_values(x, layers, features)
    maps = q.argmax(-1).transpose(0, 1).contiguous()  # (N, incoming)
    idx = resolve_positions(maps, start=1)
    return metrics(close, idx, table, cost, a, rf)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bars", type=int, default=1000000)
    ap.add_argument("--features", type=int, default=61)
    ap.add_argument("--hidden", default="512,512,512")
    ap.add_argument("--policies", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default=None, help="bfloat16 or float32 (default: bf16 on cuda)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype) if args.dtype else (torch.bfloat16 if device.type == "cuda" else torch.float32)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    hidden = [int(h) for h in args.hidden.split(",")]
    x, close, nets = make_inputs(args.bars, args.features, hidden, args.policies, device, dtype, 7)
    table = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64, device=device)

    def run():
        out = [evaluate(x, close, net, args.features, table, 0.0005, 98280.0, 0.0) for net in nets]
        if device.type == "cuda":
            torch.cuda.synchronize()
        return out

    run()  # warm-up
    times = []
    with torch.no_grad():
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = run()
            times.append(time.perf_counter() - start)
    print(json.dumps({
        "peer": "pytorch-eager", "torch": torch.__version__, "device": str(device), "dtype": str(dtype),
        "bars": args.bars, "hidden": hidden, "policies": args.policies, "threads": torch.get_num_threads(),
        "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
        "policy_bars_per_s": args.bars * args.policies / statistics.median(times),
        "sharpe_policy0": result[0]["sharpe"],
    }))


if __name__ == "__main__":
    main()
