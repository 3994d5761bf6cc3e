// porter-regen: arch=sm_90 ptxas=sm_90,sm_90a out=pipeline_fused.ptx
//
// A port of the hot loop with one kernel fewer: delta and Y in one kernel. It declares its own
// sequence (porter-kernel lines, one per step), as a port that fuses or splits kernels must.
// porter-kernel: entry = "rn_fused", grid = ["R"], block = [256], args = ["X", "W", "mean", "delta", "Y", "eps", "R", "C", "ldx", "ldy"]
// porter-kernel: zero = ["S"]
// porter-kernel: entry = "rn_colsum", grid = ["ceil_div(C, 256)", "ceil_div(R, 32)"], block = [256], args = ["X", "delta", "S", "R", "C", "ldx"]
#define PORTER_FUSED
#include "pipeline.cuh"
