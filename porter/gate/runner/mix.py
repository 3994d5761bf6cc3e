"""The one mixing function of porter's own kernels, in CUDA C: what their random words are made of."""

MIX_SOURCE = r"""
// splitmix64: a 64-bit mix of a key and a place, nothing a kernel could predict without the key.
__device__ __forceinline__ unsigned long long porter_mix(unsigned long long key, unsigned long long place) {
    unsigned long long z = key + place * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
"""
