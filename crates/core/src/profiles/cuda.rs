//! CUDA toolkit driver requirements (`profiles/cuda.yaml`): the corresponding driver of every
//! toolkit minor release, minor-version compatibility per major, and forward compatibility.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{PartialDate, TextList, text_list};
use crate::version::{CudaVersion, DriverVersion};

/// What a CUDA toolkit version needs from the driver.
///
/// The catalog holds one entry per toolkit minor release (`12.4`) and one per major (`12`). A
/// major entry stands for "an application built with some 12.x toolkit": its `min_driver` is the
/// driver of the newest known 12.x release, so a driver at or above it runs any known 12.x
/// application with every feature.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CudaRequirement {
    /// The toolkit version this entry describes: a minor (`12.4`) or a whole major (`12`).
    pub cuda: CudaVersion,
    /// The toolkit's corresponding driver: from it on, applications built with this toolkit run
    /// with every feature. A bare branch (`615`) means any driver of that branch.
    pub min_driver: DriverVersion,
    /// GA release date, when known.
    pub released: Option<PartialDate>,
    /// Updates of this minor release and the driver each needs.
    pub updates: Vec<CudaUpdate>,
    /// Minor-version compatibility of this toolkit's major, if NVIDIA defines it.
    pub minor_version_compat: Option<MinorVersionCompat>,
    /// Caveats from the data file.
    pub notes: Vec<String>,
}

/// How well a driver supports a CUDA toolkit version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CudaSupport {
    /// The driver is at or above the toolkit's corresponding driver.
    Full,
    /// The driver is below it but within the major's minor-version compatibility: applications
    /// run with the limits in [`MinorVersionCompat::limits`].
    MinorVersionCompatibility,
    /// The driver is too old for this toolkit.
    Unsupported,
}

impl CudaRequirement {
    /// Whether this entry stands for a whole major (`12`) rather than one minor release.
    pub fn is_major_entry(&self) -> bool {
        self.cuda.minor().is_none()
    }

    /// How `driver` supports this toolkit version.
    pub fn support(&self, driver: &DriverVersion) -> CudaSupport {
        if *driver >= self.min_driver {
            return CudaSupport::Full;
        }
        match &self.minor_version_compat {
            Some(mvc) if *driver >= mvc.min_driver => CudaSupport::MinorVersionCompatibility,
            _ => CudaSupport::Unsupported,
        }
    }
}

/// An update release of a CUDA minor version (`12.4 Update 1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaUpdate {
    /// Update name as NVIDIA lists it (`Update 1`).
    pub name: String,
    /// Its corresponding driver.
    pub min_driver: DriverVersion,
}

/// Minor-version compatibility (MVC) of one CUDA major: applications built with any toolkit of the
/// major run on a driver of the major's family at or above `min_driver`, with limits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MinorVersionCompat {
    /// The CUDA major (`12`).
    pub major: u32,
    /// Lowest driver that runs the major's applications under MVC.
    pub min_driver: DriverVersion,
    /// Where the family's MVC range ends; from there on ordinary backward compatibility applies.
    pub max_driver_exclusive: Option<DriverVersion>,
    /// What does not work under MVC (no PTX JIT of newer PTX, newer APIs fail, ...).
    pub limits: Vec<String>,
    /// Caveats for this major.
    pub notes: Vec<String>,
    /// Where these facts come from.
    pub sources: Vec<String>,
}

/// CUDA forward compatibility (`cuda-compat` packages): a newer CUDA major on an older driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForwardCompatibility {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// Package name pattern (`cuda-compat-<major>-<minor>`).
    pub package: String,
    /// Hardware it works on.
    pub supported_on: Vec<String>,
    /// Hardware it does not work on.
    pub not_supported_on: Vec<String>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// `profiles/cuda.yaml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CudaFile {
    pub(super) source: TextList,
    /// When the sources were read (every row without its own date).
    #[serde(default)]
    pub(super) read: Option<PartialDate>,
    pub(super) releases: Vec<CudaReleaseFile>,
    pub(super) minor_version_compatibility: MvcFile,
    pub(super) forward_compatibility: ForwardCompatibility,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CudaReleaseFile {
    pub(super) cuda: CudaVersion,
    pub(super) min_driver: DriverVersion,
    #[serde(default)]
    pub(super) released: Option<PartialDate>,
    #[serde(default)]
    pub(super) updates: Vec<CudaUpdate>,
    /// When this row was last read, if later than the file's date.
    #[serde(default)]
    pub(super) read: Option<PartialDate>,
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub(super) notes: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MvcFile {
    pub(super) source: TextList,
    pub(super) limits: Vec<String>,
    /// Keyed by the major as a string (`"12"`): YAML map keys are read as strings.
    pub(super) majors: BTreeMap<String, MvcMajorFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MvcMajorFile {
    pub(super) min_driver: DriverVersion,
    #[serde(default)]
    pub(super) max_driver_exclusive: Option<DriverVersion>,
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub(super) notes: Vec<String>,
}
