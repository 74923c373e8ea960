//! GPU architectures (`profiles/architectures.yaml`): compute capabilities, the driver branches
//! that support them and the kernel-module flavours they can use.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{ComputeCapability, TextList, text_list};
use super::gpu::KernelModuleSupport;
use crate::version::{CudaVersion, DriverVersion};

/// One GPU architecture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Architecture {
    /// Architecture name (`Hopper`); filled from the map key of the data file.
    #[serde(skip_deserializing)]
    pub name: String,
    /// Compute capabilities of this architecture's chips.
    pub compute_capabilities: Vec<ComputeCapability>,
    /// Value of GPU Feature Discovery's `nvidia.com/gpu.family` label (`ada-lovelace`).
    pub gfd_family: String,
    /// First CUDA toolkit that targets the architecture.
    pub first_cuda: CudaVersion,
    /// Last CUDA toolkit (a whole major, e.g. `12`, means "through 12.x"); `None` while supported.
    #[serde(default)]
    pub last_cuda: Option<CudaVersion>,
    /// Oldest driver that supports the architecture; a bare branch (`384`) when only the branch
    /// is known. `None` when the reference does not give one.
    #[serde(default)]
    pub min_driver: Option<DriverVersion>,
    /// Newest driver branch that still drives the architecture (`580` for Volta); `None` while
    /// current branches support it.
    #[serde(default)]
    pub last_driver_branch: Option<u32>,
    /// Kernel-module flavours the architecture can use.
    pub kernel_modules: KernelModuleSupport,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

impl Architecture {
    /// Whether a driver of `branch` supports this architecture, by its first and last branches.
    pub fn supported_by_branch(&self, branch: u32) -> bool {
        let after_first = self
            .min_driver
            .as_ref()
            .is_none_or(|min| branch >= min.branch());
        let before_last = self.last_driver_branch.is_none_or(|last| branch <= last);
        after_first && before_last
    }
}

/// `profiles/architectures.yaml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ArchitecturesFile {
    pub(super) source: TextList,
    pub(super) architectures: BTreeMap<String, Architecture>,
}
