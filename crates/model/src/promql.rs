//! PromQL helpers shared by the rules gpuctl renders (`render/objects.rs`) and the metric checks it
//! runs against Prometheus (`metrics/`): both must ask for the same step, or a recording rule and a
//! live check of the same window disagree.

/// The subquery step for a window: about 60 steps per window, between 1 s and 60 s.
pub fn resolution_s(window_ms: u64) -> u64 {
    (window_ms / 60_000).clamp(1, 60)
}
