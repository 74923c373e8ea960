//! CUDA toolkit driver requirements (`profiles/cuda.yaml`): the corresponding driver of every
//! toolkit minor release, minor-version compatibility per major, and forward compatibility.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{PartialDate, TextList, text_list};
use super::{CUDA_FILE, FactRow};
use super::{ProfileError, RowLog, inconsistent, push_sources, require_source, sourced};
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

pub(super) type CudaTables = (BTreeMap<CudaVersion, CudaRequirement>, ForwardCompatibility);

pub(super) fn load_cuda(
    file: CudaFile,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<CudaTables, ProfileError> {
    const F: &str = CUDA_FILE;
    sourced(sources, F, None, &file.source.0)?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    let mvc_file = file.minor_version_compatibility;
    sourced(
        sources,
        F,
        Some("minor_version_compatibility"),
        &mvc_file.source.0,
    )?;
    log.row("minor_version_compatibility", &mvc_file.source.0, None);
    log.row(
        "forward_compatibility",
        &file.forward_compatibility.source,
        None,
    );
    require_source(
        F,
        "forward_compatibility",
        &file.forward_compatibility.source,
    )?;
    push_sources(
        sources,
        F,
        Some("forward_compatibility"),
        &file.forward_compatibility.source,
    );

    let mvc = minor_version_compat(mvc_file)?;
    let mut table = releases(file.releases, &mvc, &mut log)?;
    add_major_entries(&mut table, &mvc);
    Ok((table, file.forward_compatibility))
}

/// Minor-version compatibility per CUDA major: each key a major, each driver range not empty.
fn minor_version_compat(
    mvc_file: MvcFile,
) -> Result<BTreeMap<u32, MinorVersionCompat>, ProfileError> {
    const F: &str = CUDA_FILE;
    let mut mvc = BTreeMap::new();
    for (major, entry) in mvc_file.majors {
        let number: u32 = major.parse().map_err(|_| {
            inconsistent(
                F,
                format!("minor_version_compatibility key `{major}` is not a CUDA major"),
            )
        })?;
        if let Some(max) = &entry.max_driver_exclusive
            && *max <= entry.min_driver
        {
            return Err(inconsistent(
                F,
                format!("CUDA {major}: max_driver_exclusive {max} <= min_driver"),
            ));
        }
        mvc.insert(
            number,
            MinorVersionCompat {
                major: number,
                min_driver: entry.min_driver,
                max_driver_exclusive: entry.max_driver_exclusive,
                limits: mvc_file.limits.clone(),
                notes: entry.notes,
                sources: mvc_file.source.0.clone(),
            },
        );
    }
    Ok(mvc)
}

/// The CUDA minor releases in order, each needing at least the driver of the one before and its
/// updates at least its GA's; every major of `mvc` has a release.
fn releases(
    releases: Vec<CudaReleaseFile>,
    mvc: &BTreeMap<u32, MinorVersionCompat>,
    log: &mut RowLog<'_>,
) -> Result<BTreeMap<CudaVersion, CudaRequirement>, ProfileError> {
    const F: &str = CUDA_FILE;
    let mut table: BTreeMap<CudaVersion, CudaRequirement> = BTreeMap::new();
    let mut previous: Option<(CudaVersion, DriverVersion)> = None;
    for release in releases {
        log.row(format!("releases.{}", release.cuda), &[], release.read);
        let cuda = release.cuda;
        if cuda.minor().is_none() || cuda.patch().is_some() {
            return Err(inconsistent(
                F,
                format!("release `{cuda}` must be `<major>.<minor>`"),
            ));
        }
        if let Some((prev_cuda, prev_driver)) = &previous {
            if cuda <= *prev_cuda {
                return Err(inconsistent(
                    F,
                    format!("release `{cuda}` is out of order or repeated"),
                ));
            }
            if release.min_driver < *prev_driver {
                return Err(inconsistent(
                    F,
                    format!(
                        "CUDA {cuda} needs {} but the older {prev_cuda} needs {prev_driver}",
                        release.min_driver
                    ),
                ));
            }
        }
        for update in &release.updates {
            if update.min_driver < release.min_driver {
                return Err(inconsistent(
                    F,
                    format!("CUDA {cuda} {} needs less than its GA", update.name),
                ));
            }
        }
        previous = Some((cuda.clone(), release.min_driver.clone()));
        let major = cuda.major();
        table.insert(
            cuda.clone(),
            CudaRequirement {
                cuda,
                min_driver: release.min_driver,
                released: release.released,
                updates: release.updates,
                minor_version_compat: mvc.get(&major).cloned(),
                notes: release.notes,
            },
        );
    }
    if table.is_empty() {
        return Err(inconsistent(F, "no releases"));
    }
    for major in mvc.keys() {
        if !table.keys().any(|v| v.major() == *major) {
            return Err(inconsistent(
                F,
                format!("minor_version_compatibility names CUDA {major}, which has no release"),
            ));
        }
    }
    Ok(table)
}

/// Adds one entry per major, standing for "some <major>.x".
fn add_major_entries(
    table: &mut BTreeMap<CudaVersion, CudaRequirement>,
    mvc: &BTreeMap<u32, MinorVersionCompat>,
) {
    // One entry per major, standing for "some <major>.x": full support from the newest known minor's
    // driver on. Releases are in order, so the last one of each major wins.
    let mut majors: BTreeMap<u32, (CudaVersion, DriverVersion)> = BTreeMap::new();
    for req in table.values() {
        majors.insert(req.cuda.major(), (req.cuda.clone(), req.min_driver.clone()));
    }
    for (major, (newest, driver)) in majors {
        let key = newest.major_only();
        table.insert(
            key.clone(),
            CudaRequirement {
                cuda: key,
                min_driver: driver,
                released: None,
                updates: Vec::new(),
                minor_version_compat: mvc.get(&major).cloned(),
                notes: vec![format!(
                    "any CUDA {major}.x application: every feature works from the driver of the newest known \
                     {major}.x release ({newest}) on"
                )],
            },
        );
    }
}
