"""Kernels run in a worker process that owns the CUDA context, so a candidate that hangs, faults or
corrupts memory never takes porter down. ``Runner`` is the parent's handle; ``worker`` is the child."""

from porter.gate.runner.client import DeviceInfo, GpuRunner, Runner, WorkerFault

__all__ = ["DeviceInfo", "GpuRunner", "Runner", "WorkerFault"]
