"""Device time of a PyTorch call as bench/cuda-sdpa.ts measures Kiln's: 5 warm-ups, then 15 batches
of 20 calls queued behind torch.cuda._sleep between two events; the median per call, in ms. Shared
by the device rounds' PyTorch scripts (attn_torch.py, f32_torch.py)."""
import statistics

import torch


def device_ms(run):
    for _ in range(5):
        run()
    torch.cuda.synchronize()
    ms = []
    for _ in range(15):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        # About 5 ms of spinning (at ~2 GHz), so the host enqueues the batch before the GPU reaches it.
        torch.cuda._sleep(10_000_000)
        s.record()
        outs = [run() for _ in range(20)]
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e) / 20)
        del outs
    return statistics.median(ms)
