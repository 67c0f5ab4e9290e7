// One sequence's row of a batched decode step, as the host writes it into device memory before the
// step (cuda/DecodeGraphs.java lays out the same 56 bytes). The row kernels (kv_append_rows,
// flash_decode_rows_*, and the step's RoPE through `positions`) read everything that changes from
// step to step from here, never from launch parameters, so one captured CUDA graph replays every
// step of a batch size.
#pragma once
#include "common.cuh"

struct DecodeRow {
  const int* pageTable;  // the sequence's page table: logical page -> pool page
  bf16* kPre;            // layer 0 of the sequence's page pool; layer l at + l * layerElems
  bf16* kRope;
  bf16* v;
  long long layerElems;  // bf16 elements per layer of kPre / kRope / v in that pool
  int slot;              // slots in use before this step's token: the token is appended there
  int pos;               // the token's position
  int chunk;             // keys per split of flash decoding (Kernels.decodePlan of slot + 1 keys)
  int pad;
};
