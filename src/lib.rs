//! gpuctl: declarative Day-0/1/2 lifecycle tool for GPU Kubernetes clusters.
