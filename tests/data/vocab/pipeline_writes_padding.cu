// porter-regen: arch=sm_90 ptxas=sm_90 out=pipeline_writes_padding.ptx
//
// Broken on purpose: rn_center writes Y's whole rows, padding included (the gate must fail it:
// elements outside the shape's view must come back unchanged).
#define PORTER_WRITES_PADDING
#include "pipeline.cuh"
