// porter-regen: arch=sm_90 ptxas=sm_90 out=pipeline_skips_work.ptx
//
// Broken on purpose: rn_colsum never adds row 0's share to S. S is declared
// deterministic = false, so it is not held bit for bit between runs; the gate must still fail it
// against the reference.
#define PORTER_SKIPS_WORK
#include "pipeline.cuh"
