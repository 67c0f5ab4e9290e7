// Forwarding header: the shared device code lives in common/common.cuh; hopper/ (kept as it is)
// includes it as "../common.cuh".
#pragma once
#include "common/common.cuh"
