#!/usr/bin/env python3
"""A population of K DQN agents trained as one loop in plain PyTorch, as a user would write
it: the peer of bench/bench_train.cpp's POP-K workloads, built from torch.func
(stack_module_state, vmap, functional_call), one fused Adam over the stacked parameters and,
optionally, one CUDA graph for the whole step.

Every member m = 1 ... K has its own online and target network (Linear/ReLU MLP, state =
features + 3 one-hot position, 3 actions; the target a copy of the online network, seeded m),
its own replay ring of `capacity` transitions and its own E environments; the bars (features
and close prices) are one copy that every member reads. The online networks' parameters are
stacked into tensors with a leading K dimension (leaves that one Adam updates) and so are the
target networks'; one forward is torch.func.vmap of torch.func.functional_call over a 'meta'
copy of the network.

One step, for all K members at once (the per-member work of bench/peers/train_peer.py's step):
the environments act on their member's online Q-values (epsilon-greedy, epsilon 0.1), earn
the per-bar net return (scale 100, cost 0.0005 per unit of position change, positions
-1/0/1) and write their transitions into their member's ring at a cursor the members share;
then every member draws a uniform batch of B indices from its own ring, its online network
evaluates s and s', its target network s', double-DQN targets (gamma 0.9), Huber loss
(delta 1, mean over the member's batch); the members' losses are summed so that one backward
gives every member its own gradient; each member's gradient is clipped at norm 10 over its
own slices of the stacked gradients; Adam (lr 1e-4). A hard target update (stacked online
copied into stacked target) every 1,000 steps, outside the timed step. The rings are
pre-filled at random so that every step learns from a full ring. bf16 autocast on CUDA by
default, TF32 allowed (under vmap the layers' products run as bf16 batched matmuls, and the
float32 bias add brings each layer's output back to float32). Eager, or with the whole step
captured into one CUDA graph (torch.cuda.CUDAGraph) and replayed.

Prints one JSON line per population size K (--members); agent_steps_per_s is K steps of one
agent per timed step. The ring capacity per member is cut so that K x capacity stays within
--ring-slots; the capacity used is in the line. A K that runs out of device memory prints a
line with its error and the next K goes on.
"""
import argparse
import copy
import gc
import json
import statistics

import torch
import torch.nn.functional as F

from peer_common import network, recorded, time_steps


def population(k, state, hidden, actions, device, first_seed=1):
    """K independently initialised online networks (member m seeded first_seed + m) and their
    target copies, stacked: (base, params, buffers, target_params, target_buffers)."""
    onlines = []
    for m in range(k):
        torch.manual_seed(first_seed + m)
        onlines.append(network(state, hidden, actions).to(device))
    targets = [copy.deepcopy(n) for n in onlines]
    params, buffers = torch.func.stack_module_state(onlines)
    params = {n: p.detach().requires_grad_() for n, p in params.items()}
    target_params, target_buffers = torch.func.stack_module_state(targets)
    target_params = {n: p.detach() for n, p in target_params.items()}
    base = copy.deepcopy(onlines[0]).to("meta")
    return base, params, buffers, target_params, target_buffers


def stacked_forward(base):
    """Q(params, buffers, x): x [K, N, state] -> [K, N, actions], member m on its own slices."""
    def one(p, b, x):
        return torch.func.functional_call(base, (p, b), (x,))
    return torch.func.vmap(one)


def member_losses(q_of, params, buffers, target_params, target_buffers, s, act, rew, s_next, gamma):
    """Double-DQN Huber loss of every member, [K]: s, s_next [K, B, state]; act, rew [K, B]."""
    q = q_of(params, buffers, s).gather(2, act.unsqueeze(2)).squeeze(2)
    with torch.no_grad():
        best = q_of(params, buffers, s_next).argmax(2, keepdim=True)
        y = rew + gamma * q_of(target_params, target_buffers, s_next).gather(2, best).squeeze(2).float()
    return F.huber_loss(q.float(), y, delta=1.0, reduction="none").mean(1)


def clip_per_member_(grads, max_norm):
    """Clip every member's gradient (its slices, along dim 0, of all the stacked gradients) to
    max_norm as torch.nn.utils.clip_grad_norm_ would clip one network's; returns the norms [K]."""
    with torch.no_grad():
        norms = torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads], 1), dim=1)
        coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))
    return norms


def make_adam(params, capturable):
    try:
        return torch.optim.Adam(params, lr=1e-4, fused=True, capturable=capturable), "fused"
    except (RuntimeError, ValueError, TypeError):
        return torch.optim.Adam(params, lr=1e-4, foreach=True, capturable=capturable), "foreach"


def run_population(args, k, capacity, device, bf16, hidden, features, close, positions):
    base, params, buffers, t_params, t_buffers = population(k, args.features + 3, hidden, 3, device)
    q_of = stacked_forward(base)
    optimizer, adam = make_adam(list(params.values()), args.graphs)
    cap, e, b, bars = capacity, args.envs, args.batch, args.bars
    torch.manual_seed(7)
    # The replay rings, one per member, pre-filled so that every step learns from a full ring.
    r_bar = torch.randint(0, bars - 2, (k, cap), device=device)
    r_pos = torch.randint(0, 3, (k, cap), device=device)
    r_act = torch.randint(0, 3, (k, cap), device=device)
    r_rew = 0.01 * torch.randn(k, cap, device=device)
    cursor = torch.zeros((), dtype=torch.int64, device=device)
    env_bar = torch.randint(0, bars - 2, (k, e), device=device)
    env_pos = torch.ones(k, e, dtype=torch.int64, device=device)
    offsets = torch.arange(e, device=device)
    epsilon, gamma, cost, scale = 0.1, 0.9, 0.0005, 100.0

    def state(bar, pos):
        return torch.cat([features[bar], F.one_hot(pos, 3).to(features.dtype)], -1)

    def step():
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            with torch.no_grad():
                q_env = q_of(params, buffers, state(env_bar, env_pos))
                explore = torch.rand(k, e, device=device) < epsilon
                action = torch.where(explore, torch.randint(0, 3, (k, e), device=device), q_env.argmax(2))
                move = close[env_bar + 1] / close[env_bar] - 1.0
                reward = scale * (positions[action] * move - cost * (positions[action] - positions[env_pos]).abs())
                slots = (cursor + offsets) % cap
                r_bar[:, slots] = env_bar
                r_pos[:, slots] = env_pos
                r_act[:, slots] = action
                r_rew[:, slots] = reward.float()
                cursor.add_(e)
                env_bar.copy_((env_bar + 1) % (bars - 2))
                env_pos.copy_(action)
            idx = torch.randint(0, cap, (k, b), device=device)
            bar_b, act_b = r_bar.gather(1, idx), r_act.gather(1, idx)
            s, s_next = state(bar_b, r_pos.gather(1, idx)), state(bar_b + 1, act_b)
            loss = member_losses(q_of, params, buffers, t_params, t_buffers,
                                 s, act_b, r_rew.gather(1, idx), s_next, gamma).sum()
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        clip_per_member_([p.grad for p in params.values()], 10.0)
        optimizer.step()

    def update_target():
        with torch.no_grad():
            for n, p in params.items():
                t_params[n].copy_(p)

    run, graph = recorded(step) if args.graphs else (step, None)
    times = time_steps(run, args.steps, args.repeats, device, update_target)
    median = 1e6 * statistics.median(times)
    del run, graph, optimizer, params, t_params, r_bar, r_pos, r_act, r_rew
    return {
        "adam": adam, "members": k, "hidden": hidden, "batch": b, "envs": e, "capacity": cap,
        "steps": args.steps, "step_us_median": median, "step_us_min": 1e6 * min(times),
        "step_us_max": 1e6 * max(times), "agent_steps_per_s": k * 1e6 / median,
        "threads": torch.get_num_threads(),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--members", default="1,2,4,8,16,32,64", help="population sizes K, one JSON line each")
    ap.add_argument("--hidden", default="512,512,512")
    ap.add_argument("--features", type=int, default=61)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--envs", type=int, default=256)
    ap.add_argument("--bars", type=int, default=200000)
    ap.add_argument("--capacity", type=int, default=1000000, help="replay capacity per member")
    ap.add_argument("--ring-slots", type=int, default=64000000,
                    help="the most ring slots over all members: capacity is cut to ring-slots / K")
    ap.add_argument("--steps", type=int, default=200)
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
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(7)
    hidden = [int(h) for h in args.hidden.split(",")]
    features = torch.randn(args.bars, args.features, device=device)
    close = 100.0 * torch.exp(torch.cumsum(0.01 * torch.randn(args.bars, device=device, dtype=torch.float64), 0))
    positions = torch.tensor([-1.0, 0.0, 1.0], device=device, dtype=torch.float64)
    head = {
        "peer": "pytorch-vmap-graphs" if args.graphs else "pytorch-vmap-eager", "torch": torch.__version__,
        "device": str(device), "dtype": "bfloat16-autocast" if bf16 else "float32",
    }
    for k in [int(m) for m in args.members.split(",")]:
        capacity = max(1, min(args.capacity, args.ring_slots // k))
        try:
            line = dict(head, **run_population(args, k, capacity, device, bf16, hidden, features, close, positions))
        except RuntimeError as error:  # torch.cuda.OutOfMemoryError is a RuntimeError
            if "out of memory" not in str(error):
                raise
            line = dict(head, members=k, capacity=capacity, error="out of memory")
        print(json.dumps(line), flush=True)
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
