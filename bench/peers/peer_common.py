"""What the training peers (train_peer.py, population_peer.py) share: the network as a user
builds it, the step recorded into one CUDA graph, and the timing loop."""
import time

import torch


def network(state, hidden, actions):
    layers, width = [], state
    for h in hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    layers.append(torch.nn.Linear(width, actions))
    return torch.nn.Sequential(*layers)


def recorded(step):
    """step() run three times on a side stream (the warm-up torch.cuda.graph asks for), then
    captured into one CUDA graph: (the graph's replay, the graph)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay, graph


def time_steps(run, steps, repeats, device, every_1000):
    """Seconds a step, for each of `repeats` timed runs of `steps` calls of run() (after 10
    untimed), every_1000() after each 1,000th call (the hard target update)."""
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(10):
        run()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(steps):
            run()
            if (i + 1) % 1000 == 0:
                every_1000()
        sync()
        times.append((time.perf_counter() - start) / steps)
    return times
