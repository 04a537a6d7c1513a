#!/usr/bin/env python3
"""The DQN training step written in plain PyTorch, as a user would write it: the peer of
bench/bench_train.cpp. One step = the environments act on the online network's Q-values
(epsilon-greedy), earn the per-bar net return and write their transitions into a replay ring
on the device; then a uniform batch is drawn, the online network evaluates s and s', the
target network s', double-DQN targets, Huber loss, backward, gradient-norm clipping at 10,
Adam (lr 1e-4); a hard target update every 1,000 steps. Eager, or with the whole step
captured into one CUDA graph (torch.cuda.graph) and replayed. Prints one JSON line.
"""
import argparse
import copy
import json
import statistics

import torch
import torch.nn.functional as F

from peer_common import network, recorded, time_steps


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--hidden", default="512,512,512")
    ap.add_argument("--features", type=int, default=61)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--envs", type=int, default=256)
    ap.add_argument("--bars", type=int, default=200000)
    ap.add_argument("--capacity", type=int, default=1000000)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dtype", default=None, help="bfloat16 (autocast) or float32 (default: bf16 on cuda)")
    ap.add_argument("--graphs", action="store_true", help="capture the step into a CUDA graph")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    bf16 = (args.dtype or ("bfloat16" if device.type == "cuda" else "float32")) == "bfloat16"
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(7)
    hidden = [int(h) for h in args.hidden.split(",")]
    features = torch.randn(args.bars, args.features, device=device)
    close = 100.0 * torch.exp(torch.cumsum(0.01 * torch.randn(args.bars, device=device, dtype=torch.float64), 0))
    positions = torch.tensor([-1.0, 0.0, 1.0], device=device, dtype=torch.float64)
    online = network(args.features + 3, hidden, 3).to(device)
    target = copy.deepcopy(online)
    optimizer = torch.optim.Adam(online.parameters(), lr=1e-4, capturable=args.graphs)
    cap, e, b = args.capacity, args.envs, args.batch
    # The replay ring, pre-filled so that every step learns from a full ring.
    r_bar = torch.randint(0, args.bars - 2, (cap,), device=device)
    r_pos = torch.randint(0, 3, (cap,), device=device)
    r_act = torch.randint(0, 3, (cap,), device=device)
    r_rew = 0.01 * torch.randn(cap, device=device)
    cursor = torch.zeros((), dtype=torch.int64, device=device)
    env_bar = torch.randint(0, args.bars - 2, (e,), device=device)
    env_pos = torch.ones(e, dtype=torch.int64, device=device)
    offsets = torch.arange(e, device=device)
    epsilon, gamma, cost, scale = 0.1, 0.9, 0.0005, 100.0

    def state(bar, pos):
        return torch.cat([features[bar], F.one_hot(pos, 3).to(features.dtype)], 1)

    def step():
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            with torch.no_grad():
                q_env = online(state(env_bar, env_pos))
                explore = torch.rand(e, device=device) < epsilon
                action = torch.where(explore, torch.randint(0, 3, (e,), device=device), q_env.argmax(1))
                move = close[env_bar + 1] / close[env_bar] - 1.0
                reward = scale * (positions[action] * move - cost * (positions[action] - positions[env_pos]).abs())
                slots = (cursor + offsets) % cap
                r_bar[slots] = env_bar
                r_pos[slots] = env_pos
                r_act[slots] = action
                r_rew[slots] = reward.float()
                cursor.add_(e)
                env_bar.copy_((env_bar + 1) % (args.bars - 2))
                env_pos.copy_(action)
            idx = torch.randint(0, cap, (b,), device=device)
            s, s_next = state(r_bar[idx], r_pos[idx]), state(r_bar[idx] + 1, r_act[idx])
            q = online(s).gather(1, r_act[idx].unsqueeze(1)).squeeze(1)
            with torch.no_grad():
                best = online(s_next).argmax(1, keepdim=True)
                y = r_rew[idx] + gamma * target(s_next).gather(1, best).squeeze(1).float()
            loss = F.huber_loss(q.float(), y, delta=1.0)
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(online.parameters(), 10.0)
        optimizer.step()

    run = recorded(step)[0] if args.graphs else step
    times = time_steps(run, args.steps, args.repeats, device,
                       lambda: target.load_state_dict(online.state_dict()))
    print(json.dumps({
        "peer": "pytorch-graphs" if args.graphs else "pytorch-eager", "torch": torch.__version__,
        "device": str(device), "dtype": "bfloat16-autocast" if bf16 else "float32", "hidden": hidden,
        "batch": b, "envs": e, "steps": args.steps, "threads": torch.get_num_threads(),
        "step_us_median": 1e6 * statistics.median(times), "step_us_min": 1e6 * min(times),
        "step_us_max": 1e6 * max(times),
    }))


if __name__ == "__main__":
    main()
