//! The metric findings' ids (GPU250–GPU299): what each finds, why, how to fix it, where its facts
//! come from. Registered in [`crate::finding`]; `gpuctl explain GPU25x` prints an entry and
//! docs/rules.md lists them (docs/doctor-metrics.md shows each with an example). The metric and
//! label names, Xid actions and thresholds themselves are data in `profiles/dcgm.yaml`.

use crate::finding::{Family, Rule};
use crate::located::Severity::{Error, Info, Warning};

macro_rules! rules {
    ($($id:literal $name:literal $area:literal $sev:ident {
        title: $title:literal, why: $why:literal, fix: $fix:literal, source: $source:literal, example: $example:literal $(,)?
    })*) => {
        /// The metric findings' rules, ordered by id.
        pub static RULES: &[Rule] = &[$(Rule {
            id: $id, name: $name, family: Family::Metrics, area: $area, severity: $sev,
            title: $title, why: $why, fix: $fix, source: $source, example: $example, fixed: "",
        }),*];
    };
}

rules! {
    "GPU250" "xid-off-the-bus" "node-hardware" Error {
        title: "A GPU reported an Xid whose immediate action in NVIDIA's Xid catalog is RESTART_BM (Xid 79: the GPU fell off the bus).",
        why: "The driver lost the GPU on PCIe; every job on it died and the GPU is unusable until the node reboots.",
        fix: "Cordon and drain the node, reboot it, check the BMC and `dmesg`; reseat or replace the GPU if it returns.",
        source: "profiles/dcgm.yaml (xid.codes: NVIDIA's Xid catalog, immediate action per Xid); `DCGM_EXP_XID_ERRORS_COUNT`, `DCGM_FI_DEV_XID_ERRORS`",
        example: "GPU GPU-8f.. on node dgx-07 fell off the bus (Xid 79): the driver lost it on PCIe, and every job on it died",
    }
    "GPU251" "xid-reset-gpu" "node-hardware" Error {
        title: "A GPU reported an Xid whose immediate action is RESET_GPU (or WORKFLOW_XID_48): a hardware fault the GPU needs a reset for.",
        why: "Until the reset, work on the GPU keeps failing (an uncorrectable ECC error, a GSP error).",
        fix: "Drain the node, `nvidia-smi -r -i INDEX` on it, uncordon; if it returns, the catalog's investigatory action the finding quotes.",
        source: "profiles/dcgm.yaml (xid.codes: NVIDIA's Xid catalog)",
        example: "GPU ... reported Xid 48 (double-bit (uncorrectable) ECC error), a hardware fault the GPU needs a reset for",
    }
    "GPU252" "xid-application" "runtime or node-hardware" Warning {
        title: "A GPU reported an Xid whose immediate action is RESTART_APP: an application error (13, 31, 68, 69) or a contained memory error (94).",
        why: "The pod's code faulted on the GPU; the GPU itself needs nothing (after Xid 94, a reset when convenient).",
        fix: "Read the pod's logs (`kubectl logs --previous`), run it under compute-sanitizer; after Xid 94, restart the pod and reset the GPU when convenient.",
        source: "profiles/dcgm.yaml (xid.codes: NVIDIA's Xid catalog)",
        example: "pod ml/train-0 caused Xid 13 (graphics engine exception) on GPU ...: an application error, not a GPU fault",
    }
    "GPU253" "xid-unclassified" "runtime or node-hardware" Warning {
        title: "A GPU reported an Xid the profile does not cover, or whose immediate action gpuctl has no command for.",
        why: "gpuctl cannot say what it asks for; NVIDIA's catalog (or a newer one) may.",
        fix: "Look the Xid up in NVIDIA's Xid catalog; read its line in the node's kernel log (`dmesg | grep -i xid`).",
        source: "profiles/dcgm.yaml (xid: the revision of NVIDIA's Xid catalog gpuctl holds)",
        example: "GPU ... reported Xid 999, which gpuctl's Xid classification does not cover",
    }
    "GPU254" "ecc-uncorrectable" "node-hardware" Error {
        title: "Uncorrectable (double-bit) ECC errors grew in the error window.",
        why: "Results computed on the GPU may be wrong (a NaN loss), and the page needs retiring or a row remap at reset.",
        fix: "Drain the node, reset the GPU (`nvidia-smi -r -i INDEX`), uncordon, rerun from a checkpoint; replace the GPU if they return.",
        source: "profiles/dcgm.yaml (exporter.metrics: `DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`; thresholds.error_window)",
        example: "GPU ... had 2 uncorrectable (double-bit) ECC errors in the last 1h: results computed on it may be wrong",
    }
    "GPU255" "row-remap-failure" "node-hardware" Error {
        title: "A GPU failed to remap a faulty memory row: it has no spare rows left.",
        why: "The memory fault cannot be repaired in the field; the GPU keeps failing.",
        fix: "Drain the node and replace the GPU (RMA).",
        source: "profiles/dcgm.yaml (exporter.metrics: `DCGM_FI_DEV_ROW_REMAP_FAILURE`)",
        example: "GPU ... failed to remap a faulty memory row: no spare rows left",
    }
    "GPU256" "rows-remapped" "node-hardware" Warning {
        title: "A GPU remapped memory rows after uncorrectable errors; the remap takes effect only after a GPU reset.",
        why: "Until the reset the faulty rows stay in use.",
        fix: "Drain the node, reset the GPU, uncordon.",
        source: "profiles/dcgm.yaml (exporter.metrics: `DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS`)",
        example: "GPU ... remapped 3 memory rows after uncorrectable errors; the remap takes effect only after a GPU reset",
    }
    "GPU257" "temperature" "node-hardware" Warning {
        title: "A GPU stayed above the temperature threshold (the blueprint's `spec.monitoring.alerts.temperatureC`, else the profile's) for the threshold's duration.",
        why: "A hot GPU slows its clocks and ages faster; cooling is failing.",
        fix: "Check the node's cooling; `nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i INDEX`; cordon the node while it is hot.",
        source: "profiles/dcgm.yaml (exporter.metrics: `DCGM_FI_DEV_GPU_TEMP`; thresholds.temperature_c, temperature_for)",
        example: "GPU ... has stayed above 85 C for 5m",
    }
    "GPU258" "clock-events" "node-hardware" Warning {
        title: "A GPU held its clocks down for a fault reason (hardware slowdown, thermal, power brake) in the error window.",
        why: "Jobs on it run slower than its peers; in a multi-GPU job the slowest GPU sets the pace.",
        fix: "`nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i INDEX`; check cooling and power.",
        source: "profiles/dcgm.yaml (clock_events.reasons: the fault bits of `DCGM_FI_DEV_CLOCKS_EVENT_REASONS`)",
        example: "GPU ... held its clocks down in the last 1h because it is too hot",
    }
    "GPU259" "nvlink-errors" "node-hardware" Warning {
        title: "A GPU counted NVLink errors (CRC, replay, recovery) in the error window.",
        why: "Multi-GPU jobs slow down or hang in NCCL.",
        fix: "`nvidia-smi nvlink -e -i INDEX`; drain and reset; reseat or replace.",
        source: "profiles/dcgm.yaml (exporter.metrics: `DCGM_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL`)",
        example: "GPU ... counted NVLink errors in the last 1h: multi-GPU jobs slow down or hang in NCCL",
    }
    "GPU260" "idle-allocated-gpu" "runtime" Warning {
        title: "A pod holds a GPU it has not used for the whole idle window (`--idle-window`, default from the profile, or `spec.accounting.idle.for`).",
        why: "The GPU is allocated and wasted while other work may wait for it. With `spec.accounting` the check is the accounting alert's condition (weighted slices and replicas, the blueprint's threshold), so doctor, the alert and `gpuctl report` agree.",
        fix: "Read the pod's logs; delete the pod or scale its owner to 0.",
        source: "profiles/dcgm.yaml (exporter.metrics: `DCGM_FI_PROF_GR_ENGINE_ACTIVE`, else `DCGM_FI_DEV_GPU_UTIL`; thresholds.idle_*); with accounting, the recording rules' expressions (profiles/accounting.yaml)",
        example: "pod team-c/notebook-0 holds GPU ... but has not used it for the last 1h (peak 0): the GPU is allocated and wasted",
    }
    "GPU261" "no-exporter-metrics" "node-hardware" Warning {
        title: "Prometheus has no dcgm-exporter series in the last minutes.",
        why: "No GPU's health or use could be checked: the other metric findings are silent, not green.",
        fix: "`kubectl get pods,servicemonitors -A -l app=nvidia-dcgm-exporter`; check Prometheus's targets.",
        source: "profiles/dcgm.yaml (exporter.metrics: `DCGM_FI_DEV_GPU_TEMP`, `DCGM_FI_DEV_GPU_UTIL`)",
        example: "Prometheus has no dcgm-exporter metrics, so no GPU's health or use could be checked",
    }
    "GPU262" "xid-ignore" "runtime or node-hardware" Info {
        title: "A GPU reported an Xid whose immediate action is IGNORE (43, 63, 92, 121, 157).",
        why: "NVIDIA's catalog asks for no reset or drain; when the Xid recurs, its investigatory action (often contacting support) applies.",
        fix: "Nothing to reset or drain; when it recurs, the catalog's investigatory action the finding quotes.",
        source: "profiles/dcgm.yaml (xid.codes, xid.buckets, xid.recurring)",
        example: "GPU ... reported Xid 92 (high single-bit ECC error rate) repeatedly in the last 1h: NVIDIA's Xid catalog asks for no immediate action (IGNORE), but it recurs",
    }
    "GPU263" "xid-action-in-message" "runtime or node-hardware" Warning {
        title: "A GPU reported an Xid whose action NVIDIA's catalog decides from the Xid message (NVLink Xids 74, 144 to 150), or Xid 45 alone.",
        why: "The metrics do not carry the message, so gpuctl cannot say which action applies.",
        fix: "Read the Xid's line in the node's kernel log and decode it with the catalog; after Xid 45 alone, restart Fabric Manager.",
        source: "profiles/dcgm.yaml (xid.codes: WORKFLOW_NVLINK_ERR, WORKFLOW_NVLINK5_ERR, WORKFLOW_XID_45)",
        example: "GPU ... reported Xid 149 (NVLink5 NETIR error): NVIDIA's catalog decides its action from the Xid message, which the metrics do not carry",
    }
    "GPU264" "gpu-recovery-action" "node-hardware" Error {
        title: "A GPU needs a recovery NVML reports (DCGM field 1523: reset, reboot, drain peer-to-peer), or reported Xid 154 without the field (a warning when the action is milder or unread).",
        why: "The driver says the GPU is unusable until that recovery is done.",
        fix: "Do the recovery the finding names (drain and reset, or drain and reboot); without the field, read the Xid 154 line in `dmesg`.",
        source: "profiles/dcgm.yaml (recovery_action: NVML's `nvmlDeviceGpuRecoveryAction_t`)",
        example: "GPU ... needs recovery: the driver reports NVML recovery action 2 NODE_REBOOT (\"Reboot Node\")",
    }
}
