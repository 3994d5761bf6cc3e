// porter-regen: arch=sm_90 ptxas=sm_90,sm_90a out=pipeline.ptx
//
// The three-kernel hot loop of pipeline.cuh, as its spec (porter.toml) describes it.
#include "pipeline.cuh"
