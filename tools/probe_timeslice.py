"""What one wait for the GPU costs when another process has work on it: a tiny kernel and a
``synchronize`` (then a read-back), 300 times each, on an idle GPU, then while a second process
keeps the GPU busy with one long single-CTA kernel after another, then with short full-GPU
kernels. Contexts of different processes take turns on the GPU (time slices), so a wait behind
another context's work costs about a time slice however little this process queued: why the
worker waits once a run (``Launch.settle``).

    python3 tools/probe_timeslice.py

On an H100 (driver 580.159.04, 2026-12-06): idle median 0.036 ms; behind the one-CTA kernel
2.36 ms; behind short kernels 2.31 ms."""
import multiprocessing as mp
import statistics
import time


def busy(kind, stop):
    import cupy as cp
    spin = cp.RawKernel(r'''extern "C" __global__ void spin(long long n, float* o){
        long long t0 = clock64(); while (clock64() - t0 < n) {} if (threadIdx.x == 0) o[blockIdx.x] = 1.0f; }''', "spin")
    o = cp.zeros(1024, dtype=cp.float32)
    while not stop.is_set():
        if kind == "one-cta":
            spin((1,), (32,), (cp.int64(2_000_000_000 // 10), o))  # ~100 ms at ~2 GHz
        else:
            for _ in range(20):
                spin((132,), (128,), (cp.int64(200_000), o))  # ~0.1 ms each
        cp.cuda.Device().synchronize()


def measure(label):
    import cupy as cp
    a = cp.zeros(16, dtype=cp.float32)
    samples = []
    for _ in range(300):
        a += 1
        t = time.perf_counter()
        cp.cuda.Device().synchronize()
        samples.append((time.perf_counter() - t) * 1e3)
    for _ in range(300):
        t = time.perf_counter()
        float(a.sum())
        samples.append((time.perf_counter() - t) * 1e3)
    samples.sort()
    print(f"{label:12} sync+readback ms: median {statistics.median(samples):.3f} p90 {samples[int(.9*len(samples))]:.3f} "
          f"max {samples[-1]:.3f} mean {statistics.mean(samples):.3f}", flush=True)


if __name__ == "__main__":
    mp.set_start_method("spawn")
    measure("idle")
    for kind in ("one-cta", "small"):
        stop = mp.Event()
        p = mp.Process(target=busy, args=(kind, stop))
        p.start()
        time.sleep(3)
        measure(kind)
        stop.set()
        p.join()
