"""The training loop of train_needle.py, resumable across processes.

A device call runs at most 10 minutes, and the model's envelope allows 15 minutes of training (issue 19), so a
long run spans two calls: the first process stops at a wall-clock deadline, writes a checkpoint and exits with
EXIT_CHECKPOINTED; a second process, started on the same (still warm) machine, loads it and carries on as if it
had never stopped. What makes that exact:
- the checkpoint holds the model, the optimizer's moments, the step, the planned step count (the learning-rate
  schedule depends on it), the loss history and the caller's extra state (tokenizer, model shape, arguments);
- the data of step s depends on (seed, s) alone (train_needle.RowMaker.batch_at), so the resumed process starts
  its loader at the next step and sees the batches the uninterrupted run would have seen.
A checkpoint is written to a temporary file and renamed, so a process killed while writing leaves the previous one.

Model-agnostic and torch-only, so tools/train/test_train_loop.py checks it on a CPU with a toy model.
"""

import math
import os
import time

# exit status of a process that stopped at its deadline and left a checkpoint to resume from (EX_TEMPFAIL)
EXIT_CHECKPOINTED = 75
FORMAT = "longsieve-train-checkpoint/1"


def lr_at(step, base_lr, warm, total):
    """Linear warm-up over `warm` steps, then cosine from base_lr down to 0.1 x base_lr at `total`."""
    if step < warm:
        return base_lr * (step + 1) / warm
    p = (step - warm) / max(1, total - warm)
    return base_lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))


def warmup_steps(total):
    return min(200, max(20, total // 20))


class TrainState:
    """Where a run stands: plain values, saved with the checkpoint."""

    def __init__(self, total, base_lr):
        self.total = total            # planned optimizer steps (fixes the schedule)
        self.base_lr = base_lr
        self.step = 0                 # optimizer steps taken
        self.elapsed = 0.0            # training seconds, summed over the processes of the run
        self.wait = 0.0               # of which waiting for data
        self.ema = None               # moving average of the answer loss
        self.hist = []                # a row every 25 steps
        self.processes = 0            # processes that trained this run (1 without a resume)
        self.commands = []            # the command line of each of them

    def to_dict(self):
        return dict(vars(self))

    @staticmethod
    def from_dict(d):
        s = TrainState(d["total"], d["base_lr"])
        vars(s).update(d)
        return s


def save_checkpoint(path, model, opt, state, extra):
    import torch
    tmp = path + ".tmp"
    torch.save({"format": FORMAT, "model": model.state_dict(), "opt": opt.state_dict(), "state": state.to_dict(),
                "extra": extra}, tmp)
    os.replace(tmp, path)


def load_checkpoint(path):
    """The checkpoint's parts as saved: {"model", "opt", "state" (a TrainState), "extra"}. Refuses other files."""
    import torch
    ck = torch.load(path, map_location="cpu")
    if not isinstance(ck, dict) or ck.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} file")
    ck["state"] = TrainState.from_dict(ck["state"])
    return ck


def train(model, opt, batches, state, loss_step, device, deadline=None, hard_stop_seconds=None, log=print,
          clip=1.0):
    """Takes optimizer steps from state.step until state.total, a batch (ids, code) from `batches` each (an
    iterator that starts at state.step). loss_step(model, ids, code) -> (loss, answer_loss, context_loss).

    Stops early and returns "deadline" when time.time() passes `deadline` (the caller checkpoints), or "wall"
    when the run's summed training time passes hard_stop_seconds (the caller exports what it has); else "done".
    """
    import torch
    state.processes += 1
    t0, elapsed0 = time.time(), state.elapsed
    reason = "done"
    while state.step < state.total:
        tw = time.time()
        ids, code = next(batches)
        ids = ids.to(device, non_blocking=True)
        code = code.to(device, non_blocking=True)
        state.wait += time.time() - tw
        lr = lr_at(state.step, state.base_lr, warmup_steps(state.total), state.total)
        for g in opt.param_groups:
            g["lr"] = lr
        loss, la, lc = loss_step(model, ids, code)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        state.step += 1
        state.elapsed = elapsed0 + time.time() - t0
        if state.step % 25 == 0 or state.step == state.total:
            la_v, lc_v = float(la.detach()), float(lc.detach())
            state.ema = la_v if state.ema is None else 0.9 * state.ema + 0.1 * la_v
            state.hist.append({"step": state.step, "seq": ids.shape[1], "answer_loss": la_v, "context_loss": lc_v,
                               "lr": lr, "elapsed": state.elapsed})
            if state.step % 100 == 0 or state.step == state.total:
                log(f"step {state.step}/{state.total} L={ids.shape[1]} answer {la_v:.4f} (ema {state.ema:.4f}) "
                    f"context {lc_v:.4f} lr {lr:.2e} data-wait {state.wait:.1f}s")
        if state.step == state.total:
            break
        if hard_stop_seconds is not None and state.elapsed > hard_stop_seconds:
            log(f"wall-clock stop at step {state.step} of {state.total}")
            reason = "wall"
            break
        if deadline is not None and time.time() > deadline:
            log(f"deadline at step {state.step} of {state.total}: checkpoint to resume from")
            reason = "deadline"
            break
    return reason
