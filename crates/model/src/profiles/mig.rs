//! MIG (Multi-Instance GPU) support of one GPU model, and the fitting of a requested layout of
//! instances onto one GPU: profile existence, per-profile maximums, the single media-extension
//! instance, compute and memory slice totals, and a search for non-overlapping placements on the
//! memory-slice axis.

use std::fmt::Write as _;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::common::text_list;
use crate::version::DriverVersion;

/// How a GPU model supports MIG.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigSupport {
    /// Minimum driver that supports MIG on this GPU (MIG user guide, Deployment Considerations).
    pub min_driver: DriverVersion,
    /// Compute (SM) slices of the whole GPU: 7, or 4 on A30 and RTX PRO Blackwell.
    pub compute_slices: u32,
    /// Width of the placement axis as `nvidia-smi mig -lgipp` prints it: 8 on 7-compute-slice
    /// GPUs, 4 on the A30, 12 on the RTX PRO 6000 Blackwell (its four memory quarters, 3 units each).
    pub memory_slices: u32,
    /// Most MIG instances one GPU can hold (the MIG user guide's "Max Number of Instances").
    pub max_instances: u32,
    /// The first GPU Operator release whose MIG Manager supports MIG on this GPU, when it is newer
    /// than the release that first supports the GPU (RTX PRO 6000 Blackwell: v25.3.4).
    pub operator_since: Option<crate::version::OperatorVersion>,
    /// Name of the shared profile table in `profiles/gpus.yaml` (`mig_profile_sets`).
    pub profile_set: String,
    /// The profiles this GPU offers, in the order of the data file.
    pub profiles: Vec<MigProfile>,
    /// Caveats from the data file about this profile table.
    pub notes: Vec<String>,
    /// Where the profile table comes from.
    pub sources: Vec<String>,
}

/// One MIG GPU-instance profile, e.g. `3g.40gb`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigProfile {
    /// Profile name as NVML and the device plugin spell it (`1g.10gb`, `1g.10gb+me`).
    pub name: String,
    /// Compute slices the instance takes.
    pub compute_slices: u32,
    /// Memory slices the instance takes: its width on the placement axis.
    pub memory_slices: u32,
    /// Most instances of this profile one GPU can hold.
    pub max_instances: u32,
    /// Slot indices where an instance may start (`nvidia-smi mig -lgipp`).
    pub placement_starts: Vec<u32>,
    /// Whether this is a media-extension profile (`+me`, `+me.all`): it takes the GPU's single set
    /// of media engines, so at most one such instance fits on a GPU.
    #[serde(default)]
    pub media_extension: bool,
    /// Oldest driver branch that offers this profile, when newer than the GPU's MIG minimum.
    #[serde(default)]
    pub min_branch: Option<u32>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// Where one instance of a fitted layout sits on the memory-slice axis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigPlacement {
    /// The profile name.
    pub profile: String,
    /// First memory slot the instance occupies.
    pub start: u32,
    /// Number of memory slots it occupies.
    pub memory_slices: u32,
}

impl MigPlacement {
    /// The memory slots this instance occupies.
    pub fn slots(&self) -> Range<u32> {
        self.start..self.start.saturating_add(self.memory_slices)
    }
}

/// Why a requested MIG layout does not fit on one GPU.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigFitError {
    /// The GPU has no profile of this name.
    #[error("unknown MIG profile `{profile}`; valid profiles for this GPU: {}", .valid.join(", "))]
    UnknownProfile {
        /// The name as requested.
        profile: String,
        /// Every profile name the GPU offers.
        valid: Vec<String>,
    },
    /// More instances of one profile than a GPU can hold.
    #[error("too many `{profile}` instances: {requested} requested, at most {max} fit on one GPU")]
    TooManyInstances {
        /// The profile name.
        profile: String,
        /// Instances requested.
        requested: u64,
        /// The profile's maximum per GPU.
        max: u32,
    },
    /// More than one media-extension instance; the GPU has one set of media engines.
    #[error(
        "{requested} media-extension instances requested ({}), but at most one +me instance fits on a GPU",
        .profiles.join(", ")
    )]
    MultipleMediaExtensions {
        /// Media-extension instances requested in total.
        requested: u64,
        /// The media-extension profiles involved.
        profiles: Vec<String>,
    },
    /// The instances need more compute slices than the GPU has.
    #[error(
        "compute slices {requested} > {available}: the layout needs more compute slices than one GPU has"
    )]
    ComputeSlices {
        /// Compute slices the layout needs.
        requested: u64,
        /// Compute slices of the GPU.
        available: u32,
    },
    /// The instances need more memory slices than the GPU has.
    #[error(
        "memory slices {requested} > {available}: the layout needs more memory slices than one GPU has"
    )]
    MemorySlices {
        /// Memory slices the layout needs.
        requested: u64,
        /// Memory slices of the GPU.
        available: u32,
    },
    /// The totals fit, but the allowed start slots admit no non-overlapping arrangement.
    #[error(
        "no placement exists for {combination}: the profiles' allowed start slots cannot be arranged without overlap"
    )]
    NoPlacement {
        /// The combination, e.g. `3g.40gb x1 + 2g.20gb x2`.
        combination: String,
    },
}

/// Widest placement axis the search handles (it keeps occupancy in a `u64`). Catalog data is at
/// at most 12 wide; anything wider can only come from a hand-built `MigSupport`.
const MAX_AXIS: u32 = 64;

impl MigSupport {
    /// The profile of this name, if the GPU offers it.
    pub fn profile(&self, name: &str) -> Option<&MigProfile> {
        self.profiles.iter().find(|p| p.name == name)
    }

    /// Every profile name, in data-file order.
    pub fn profile_names(&self) -> Vec<String> {
        self.profiles.iter().map(|p| p.name.clone()).collect()
    }

    /// Decides whether the requested instances fit on ONE GPU, and returns a placement when they do.
    ///
    /// `layout` lists `(profile, count)` pairs as a blueprint's `mig.layout` does; a profile named
    /// twice counts twice, and a count of 0 only checks that the profile exists. An empty layout
    /// fits (MIG enabled with no instances, as mig-parted allows).
    ///
    /// Checks run in this order, and the first failure is returned: every profile exists, no
    /// profile exceeds its per-GPU maximum, at most one media-extension instance, compute slices,
    /// memory slices, and finally a search for non-overlapping placements over each profile's
    /// allowed start slots. Placements are returned sorted by start slot.
    pub fn fit<S: AsRef<str>>(
        &self,
        layout: &[(S, u32)],
    ) -> Result<Vec<MigPlacement>, MigFitError> {
        // Merge repeated names, keeping first-seen order so that errors follow the layout.
        let mut requested: Vec<(&MigProfile, u64)> = Vec::new();
        for (name, count) in layout {
            let name = name.as_ref();
            let profile = self
                .profile(name)
                .ok_or_else(|| MigFitError::UnknownProfile {
                    profile: name.to_owned(),
                    valid: self.profile_names(),
                })?;
            match requested.iter_mut().find(|(p, _)| p.name == profile.name) {
                Some((_, total)) => *total = total.saturating_add(u64::from(*count)),
                None => requested.push((profile, u64::from(*count))),
            }
        }
        requested.retain(|(_, count)| *count > 0);

        for (profile, count) in &requested {
            if *count > u64::from(profile.max_instances) {
                return Err(MigFitError::TooManyInstances {
                    profile: profile.name.clone(),
                    requested: *count,
                    max: profile.max_instances,
                });
            }
        }

        let media: Vec<&(&MigProfile, u64)> = requested
            .iter()
            .filter(|(p, _)| p.media_extension)
            .collect();
        let media_count: u64 = media.iter().map(|(_, n)| n).sum();
        if media_count > 1 {
            return Err(MigFitError::MultipleMediaExtensions {
                requested: media_count,
                profiles: media.iter().map(|(p, _)| p.name.clone()).collect(),
            });
        }

        // Counts are bounded by max_instances by now; saturating sums keep even a hand-built
        // `MigSupport` with absurd numbers from overflowing.
        let total = |slices: fn(&MigProfile) -> u32| {
            requested.iter().fold(0u64, |acc, (p, n)| {
                acc.saturating_add(u64::from(slices(p)).saturating_mul(*n))
            })
        };
        let compute = total(|p| p.compute_slices);
        if compute > u64::from(self.compute_slices) {
            return Err(MigFitError::ComputeSlices {
                requested: compute,
                available: self.compute_slices,
            });
        }
        let memory = total(|p| p.memory_slices);
        if memory > u64::from(self.memory_slices) {
            return Err(MigFitError::MemorySlices {
                requested: memory,
                available: self.memory_slices,
            });
        }

        self.place(&requested)
            .ok_or_else(|| MigFitError::NoPlacement {
                combination: combination(&requested),
            })
    }

    /// Backtracking search over start slots. Wider instances go first (they have the fewest
    /// starts), and instances of one profile take increasing starts so that permutations of
    /// identical instances are not searched again.
    fn place(&self, requested: &[(&MigProfile, u64)]) -> Option<Vec<MigPlacement>> {
        if self.memory_slices > MAX_AXIS {
            return None;
        }
        let mut instances: Vec<&MigProfile> = Vec::new();
        for (profile, count) in requested {
            // Every instance needs at least one slot, so more instances than slots cannot fit;
            // checking first also bounds the vector for hand-built zero-width profiles.
            if instances.len() as u64 + count > u64::from(self.memory_slices) {
                return None;
            }
            instances.extend(std::iter::repeat_n(*profile, *count as usize));
        }
        // Stable sort: equal widths keep layout order, which keeps identical profiles adjacent.
        instances.sort_by_key(|p| std::cmp::Reverse(p.memory_slices));

        let mut starts = vec![0u32; instances.len()];
        if !self.search(&instances, 0, 0, &mut starts) {
            return None;
        }
        let mut placements: Vec<MigPlacement> = instances
            .iter()
            .zip(&starts)
            .map(|(profile, start)| MigPlacement {
                profile: profile.name.clone(),
                start: *start,
                memory_slices: profile.memory_slices,
            })
            .collect();
        placements.sort_by(|a, b| (a.start, &a.profile).cmp(&(b.start, &b.profile)));
        Some(placements)
    }

    fn search(
        &self,
        instances: &[&MigProfile],
        index: usize,
        occupied: u64,
        starts: &mut [u32],
    ) -> bool {
        let Some(profile) = instances.get(index) else {
            return true;
        };
        // Symmetry breaking: an instance of the same profile as the previous one starts later.
        let min_start = match index.checked_sub(1) {
            Some(prev) if instances[prev].name == profile.name => starts[prev].saturating_add(1),
            _ => 0,
        };
        for &start in &profile.placement_starts {
            if start < min_start {
                continue;
            }
            let Some(end) = start.checked_add(profile.memory_slices) else {
                continue;
            };
            if end > self.memory_slices {
                continue;
            }
            let mask = slot_mask(start, end);
            if occupied & mask != 0 {
                continue;
            }
            starts[index] = start;
            if self.search(instances, index + 1, occupied | mask, starts) {
                return true;
            }
        }
        false
    }
}

/// Bits `start..end` set; `end <= MAX_AXIS` is checked by the caller.
fn slot_mask(start: u32, end: u32) -> u64 {
    let width = end - start;
    if width == 0 {
        return 0;
    }
    let ones = if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    ones << start
}

/// `3g.40gb x1 + 2g.20gb x2`, in layout order.
fn combination(requested: &[(&MigProfile, u64)]) -> String {
    let mut out = String::new();
    for (i, (profile, count)) in requested.iter().enumerate() {
        if i > 0 {
            out.push_str(" + ");
        }
        let _ = write!(out, "{} x{count}", profile.name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiles::Catalog;

    fn mig(gpu: &str) -> &'static MigSupport {
        let model = Catalog::embedded()
            .gpu(gpu)
            .unwrap_or_else(|| panic!("{gpu} in catalog"));
        model
            .mig
            .as_ref()
            .unwrap_or_else(|| panic!("{gpu} supports MIG"))
    }

    fn layout(pairs: &[(&str, u32)]) -> Vec<(String, u32)> {
        pairs.iter().map(|(p, n)| ((*p).to_owned(), *n)).collect()
    }

    /// Real layouts, with where each expectation comes from. Placement rules are compat-data.md
    /// §4c (`nvidia-smi mig -lgipp` on A100/H100, 8-wide memory axis): 1g {0..6}:1,
    /// 1g double-memory {0,2,4,6}:2, 2g {0,2,4}:2, 3g {0,4}:4, 4g {0}:4, 7g {0}:8.
    #[test]
    fn real_layouts_fit_or_fail_as_the_placement_table_says() {
        struct Case {
            gpu: &'static str,
            layout: &'static [(&'static str, u32)],
            fits: bool,
            why: &'static str,
        }
        let cases = [
            Case {
                gpu: "A100-SXM4-40GB",
                layout: &[("3g.20gb", 2)],
                fits: true,
                why: "§4b max 2; §4c 3g starts {0,4} width 4 -> slots 0-3 and 4-7 (listed full mix 3g+3g)",
            },
            Case {
                gpu: "A100-SXM4-40GB",
                layout: &[("4g.20gb", 1), ("3g.20gb", 1)],
                fits: true,
                why: "§4c 4g at {0} takes 0-3, 3g at 4 takes 4-7; 4+3 = 7 compute (listed full mix 4g+3g; R510+)",
            },
            Case {
                gpu: "A100-SXM4-40GB",
                layout: &[("4g.20gb", 2)],
                fits: false,
                why: "§4b 4g.20gb max 1 per GPU (and 8 compute slices > 7)",
            },
            Case {
                gpu: "A100-SXM4-40GB",
                layout: &[("1g.5gb", 7)],
                fits: true,
                why: "§4b 1g.5gb max 7; §4c starts {0..6} (listed full mix 7x1g)",
            },
            Case {
                gpu: "A100-SXM4-40GB",
                layout: &[("1g.5gb", 8)],
                fits: false,
                why: "§4b 1g.5gb max 7; slot 7 is not a 1g start in §4c",
            },
            Case {
                gpu: "A100-SXM4-40GB",
                layout: &[("7g.40gb", 1)],
                fits: true,
                why: "§4b 7g.40gb max 1; §4c {0}:8",
            },
            Case {
                gpu: "H100-SXM5-80GB",
                layout: &[("3g.40gb", 2)],
                fits: true,
                why: "§4b H100 3g.40gb max 2; §4c {0,4}:4",
            },
            Case {
                gpu: "H100-SXM5-80GB",
                layout: &[("1g.10gb", 7)],
                fits: true,
                why: "§4b H100 1g.10gb max 7; §4c {0..6}:1",
            },
            Case {
                gpu: "H100-SXM5-80GB",
                layout: &[("1g.10gb+me", 2)],
                fits: false,
                why: "§4b 1g.10gb+me max 1; §4a/§4c only one +me instance per GPU",
            },
            Case {
                gpu: "H100-SXM5-80GB",
                layout: &[("2g.20gb", 3), ("1g.10gb", 1)],
                fits: true,
                why: "§4c 2g at 0,2,4 (slots 0-5) and 1g at 6; 7 compute, 7 memory (listed full mix 2g+2g+2g+1g)",
            },
            Case {
                gpu: "H100-SXM5-80GB",
                layout: &[("3g.40gb", 1), ("2g.20gb", 1), ("1g.10gb", 2)],
                fits: true,
                why: "§4c: with 3g at 0 the second 1g would need slot 7 (not a 1g start), so 3g goes to 4-7, \
                      2g to 0-1, 1g to 2 and 3 (listed full mix 3g+2g+1g+1g)",
            },
            Case {
                gpu: "H100-SXM5-80GB",
                layout: &[("3g.40gb", 1), ("2g.20gb", 2)],
                fits: true,
                why: "§4c 2g starts {0,2,4}: 3g at 4-7 leaves 0-3 for two 2g",
            },
            Case {
                gpu: "H100-SXM5-80GB",
                layout: &[("4g.40gb", 1), ("1g.20gb", 2)],
                fits: true,
                why: "§4c 4g at 0-3, 1g.20gb (double memory, {0,2,4,6}:2) at 4-5 and 6-7",
            },
            Case {
                gpu: "H100-SXM5-80GB",
                layout: &[("3g.40gb", 2), ("1g.10gb", 1)],
                fits: false,
                why: "7 compute slices but 9 memory slices > 8 (§4b fractions 4/8 + 4/8 + 1/8)",
            },
            Case {
                gpu: "A30-24GB",
                layout: &[("2g.12gb", 1), ("1g.6gb", 2)],
                fits: true,
                why: "§4c A30 2g {0,2}:2 and 1g {0,1,2,3}:1 on the 4-wide axis",
            },
            Case {
                gpu: "A30-24GB",
                layout: &[("1g.6gb+me", 1), ("2g.12gb+me", 1)],
                fits: false,
                why: "each +me profile has max 1 (§4b), but one GPU holds one +me instance in total (§4a)",
            },
        ];
        for case in &cases {
            let result = mig(case.gpu).fit(&layout(case.layout));
            assert_eq!(
                result.is_ok(),
                case.fits,
                "{} {:?}: expected fits={} ({}), got {:?}",
                case.gpu,
                case.layout,
                case.fits,
                case.why,
                result
            );
        }
    }

    #[test]
    fn errors_say_exactly_what_failed() {
        let a100 = mig("A100-SXM4-40GB");
        let h100 = mig("H100-SXM5-80GB");

        let err = a100.fit(&layout(&[("3g.40gb", 1)])).unwrap_err();
        assert!(
            matches!(&err, MigFitError::UnknownProfile { profile, valid }
            if profile == "3g.40gb" && valid.contains(&"3g.20gb".to_owned()))
        );
        assert!(
            err.to_string()
                .contains("valid profiles for this GPU: 1g.5gb, 1g.5gb+me"),
            "{err}"
        );

        assert_eq!(
            a100.fit(&layout(&[("4g.20gb", 2)])).unwrap_err(),
            MigFitError::TooManyInstances {
                profile: "4g.20gb".into(),
                requested: 2,
                max: 1
            }
        );
        assert_eq!(
            a100.fit(&layout(&[("1g.5gb", 8)])).unwrap_err().to_string(),
            "too many `1g.5gb` instances: 8 requested, at most 7 fit on one GPU"
        );
        assert_eq!(
            h100.fit(&layout(&[("1g.10gb+me", 2)])).unwrap_err(),
            MigFitError::TooManyInstances {
                profile: "1g.10gb+me".into(),
                requested: 2,
                max: 1
            }
        );
        assert_eq!(
            mig("A30-24GB")
                .fit(&layout(&[("1g.6gb+me", 1), ("2g.12gb+me", 1)]))
                .unwrap_err(),
            MigFitError::MultipleMediaExtensions {
                requested: 2,
                profiles: vec!["1g.6gb+me".into(), "2g.12gb+me".into()]
            }
        );
        // 4g + 2g + 1g + 1g: within every per-profile maximum, but 8 compute slices.
        assert_eq!(
            h100.fit(&layout(&[("4g.40gb", 1), ("2g.20gb", 1), ("1g.10gb", 2)]))
                .unwrap_err(),
            MigFitError::ComputeSlices {
                requested: 8,
                available: 7
            }
        );
        assert_eq!(
            h100.fit(&layout(&[("3g.40gb", 2), ("1g.10gb", 1)]))
                .unwrap_err(),
            MigFitError::MemorySlices {
                requested: 9,
                available: 8
            }
        );
        assert_eq!(
            h100.fit(&layout(&[("3g.40gb", 2), ("1g.10gb", 1)]))
                .unwrap_err()
                .to_string(),
            "memory slices 9 > 8: the layout needs more memory slices than one GPU has"
        );
    }

    #[test]
    fn placements_are_reported_by_slot() {
        let placed = mig("H100-SXM5-80GB")
            .fit(&layout(&[("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)]))
            .unwrap();
        let slots: Vec<(String, Range<u32>)> = placed
            .iter()
            .map(|p| (p.profile.clone(), p.slots()))
            .collect();
        assert_eq!(
            slots,
            vec![
                ("2g.20gb".to_owned(), 0..2),
                ("1g.10gb".to_owned(), 2..3),
                ("1g.10gb".to_owned(), 3..4),
                ("3g.40gb".to_owned(), 4..8),
            ]
        );
    }

    #[test]
    fn empty_and_zero_count_layouts() {
        let h100 = mig("H100-SXM5-80GB");
        assert_eq!(h100.fit::<&str>(&[]), Ok(vec![]));
        assert_eq!(h100.fit(&[("7g.80gb", 0)]), Ok(vec![]));
        assert!(matches!(
            h100.fit(&[("9g.99gb", 0)]),
            Err(MigFitError::UnknownProfile { .. })
        ));
        // Repeated names add up.
        assert!(matches!(
            h100.fit(&[("3g.40gb", 1), ("3g.40gb", 2)]),
            Err(MigFitError::TooManyInstances { requested: 3, .. })
        ));
        // Huge counts are rejected by the per-profile maximum, not by overflow.
        assert!(matches!(
            h100.fit(&[("1g.10gb", u32::MAX), ("1g.10gb", u32::MAX)]),
            Err(MigFitError::TooManyInstances { .. })
        ));
    }

    /// Every combination of counts (0..=max per profile) on every profile table of the catalog:
    /// whatever `fit` accepts comes with placements on allowed starts, inside the axis, without
    /// overlap, and within the totals. Enumerating the real tables also shows that the §4c start
    /// slots never reject a layout the count checks accept (hence the synthetic case below).
    #[test]
    fn fitted_placements_are_valid_on_every_catalog_gpu() {
        let mut seen_sets = std::collections::BTreeSet::new();
        for gpu in Catalog::embedded().gpus() {
            let Some(mig) = &gpu.mig else { continue };
            if !seen_sets.insert(mig.profile_set.clone()) {
                continue;
            }
            let mut counts = vec![0u32; mig.profiles.len()];
            'combinations: loop {
                let layout: Vec<(&str, u32)> = mig
                    .profiles
                    .iter()
                    .zip(&counts)
                    .map(|(p, c)| (p.name.as_str(), *c))
                    .collect();
                match mig.fit(&layout) {
                    Ok(placements) => {
                        let mut occupied = vec![false; mig.memory_slices as usize];
                        let mut compute = 0;
                        for placement in &placements {
                            let profile = mig.profile(&placement.profile).unwrap();
                            assert!(
                                profile.placement_starts.contains(&placement.start),
                                "{placement:?}"
                            );
                            for slot in placement.slots() {
                                let slot = slot as usize;
                                assert!(
                                    slot < occupied.len() && !occupied[slot],
                                    "{}: {layout:?}",
                                    gpu.key
                                );
                                occupied[slot] = true;
                            }
                            compute += profile.compute_slices;
                        }
                        assert!(compute <= mig.compute_slices);
                        let requested: u32 = counts.iter().sum();
                        assert_eq!(placements.len() as u32, requested);
                    }
                    Err(MigFitError::NoPlacement { combination }) => {
                        panic!(
                            "{}: {combination} passes every count check but has no placement; \
                             if the tables now say so, turn this into a table case",
                            gpu.key
                        )
                    }
                    Err(_) => {}
                }
                // Next combination, odometer style.
                for (count, profile) in counts.iter_mut().zip(&mig.profiles) {
                    *count += 1;
                    if *count <= profile.max_instances {
                        continue 'combinations;
                    }
                    *count = 0;
                }
                break;
            }
        }
    }

    /// A synthetic GPU whose start slots make a combination impossible although every total fits:
    /// the search, not the arithmetic, must reject it.
    #[test]
    fn no_placement_when_start_slots_collide() {
        let profile = |name: &str, width: u32, max: u32, starts: &[u32]| MigProfile {
            name: name.to_owned(),
            compute_slices: 1,
            memory_slices: width,
            max_instances: max,
            placement_starts: starts.to_vec(),
            media_extension: false,
            min_branch: None,
            notes: vec![],
        };
        let support = MigSupport {
            min_driver: "1".parse().unwrap(),
            operator_since: None,
            compute_slices: 7,
            memory_slices: 8,
            max_instances: 7,
            profile_set: "synthetic".into(),
            profiles: vec![
                profile("2g.wide", 2, 3, &[0, 2, 4]),
                profile("1g.small", 1, 7, &[0, 1, 2, 3, 4, 5, 6]),
            ],
            notes: vec![],
            sources: vec![],
        };
        // 3 x 2-wide fill 0-5; 1-wide instances can use 6 but not 7: two of them cannot be placed.
        assert_eq!(
            support.fit(&[("2g.wide", 3), ("1g.small", 2)]),
            Err(MigFitError::NoPlacement {
                combination: "2g.wide x3 + 1g.small x2".into()
            })
        );
        assert!(support.fit(&[("2g.wide", 3), ("1g.small", 1)]).is_ok());
    }
}
