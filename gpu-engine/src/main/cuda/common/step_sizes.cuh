// The sizes of one sparse decode step that a CUDA graph cannot bake in (cuda/DecodeStep): a replayed
// step attends one more slot than the step it was captured from, so its kernels (TokenSelect's,
// StreamingLLM's window list) read these from the step's plan in device memory instead of their int
// parameters. Written by the host (the policy's planStep) with everything else of the step in one
// copy; null outside a captured step, where the int parameters hold the same values.
#pragma once

#define STEP_END 0    // slots the step's query sees, its own included
#define STEP_CANDS 1  // candidates scored: end - local - sinks
#define STEP_N 2      // values the top-k picks from: cands, or the max-pooled length
#define STEP_POS 3    // the query's real position (score=rope)
#define STEP_INTS 4   // SelectKernels.STEP_INTS

// The step's value i where there is a step plan, else the launch's own v.
__device__ __forceinline__ int step_size(const int* __restrict__ step, int i, int v) {
  return step != nullptr ? step[i] : v;
}
