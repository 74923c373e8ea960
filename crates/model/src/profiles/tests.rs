//! The catalog's tables, loaded and cross-checked: the embedded ones load, and each inconsistency
//! a table can have is refused with its file and what to fix.

use super::*;

fn catalog() -> &'static Catalog {
    Catalog::embedded()
}

type KubeVersionForTest = crate::version::KubeVersion;

fn v<T: std::str::FromStr>(s: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    s.parse().unwrap()
}

#[test]
fn embedded_catalog_loads() {
    // `embedded()` expects; this test gives the error in full if the data is broken.
    if let Err(e) = Catalog::from_sources(&ProfileSources::EMBEDDED) {
        panic!("{e}");
    }
}

#[test]
fn catalog_holds_every_required_gpu() {
    let required = [
        "A30-24GB",
        "A100-SXM4-40GB",
        "A100-SXM4-80GB",
        "A100-PCIE-40GB",
        "A100-PCIE-80GB",
        "H100-SXM5-80GB",
        "H100-PCIE-80GB",
        "H100-NVL-94GB",
        "H20-96GB",
        "H200-SXM5-141GB",
        "H200-NVL-141GB",
        "GH200-96GB",
        "B200",
        "GB200",
        "B300",
        "RTX-PRO-6000-BLACKWELL",
        "V100-SXM2-16GB",
        "V100-SXM2-32GB",
        "V100-PCIE-32GB",
        "T4",
        "A10",
        "L4",
        "L40S",
        "RTX-4090",
        // Issue 26: GPUs NVIDIA's operator lists.
        "L40",
        "L20",
        "A40",
        "A16",
        "A2",
        "A100X",
        "A30X",
        "RTX-PRO-6000D",
        "GB10",
        "RTX-PRO-5000-BLACKWELL",
        "RTX-PRO-4500-BLACKWELL",
    ];
    for key in required {
        assert!(catalog().gpu(key).is_some(), "{key} missing");
    }
    let keys: Vec<&str> = catalog().gpus().map(|g| g.key.as_str()).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted, "gpus() is sorted by key");
}

#[test]
fn mig_support_matches_the_mig_guide() {
    // compat-data.md §4a: MIG-capable products and their instance maximums.
    let mig_capable = [
        ("A30-24GB", 4),
        ("A100-SXM4-40GB", 7),
        ("A100-PCIE-80GB", 7),
        ("H100-SXM5-80GB", 7),
        ("H100-NVL-94GB", 7),
        ("GH200-96GB", 7),
        ("H20-96GB", 7),
        ("H200-NVL-141GB", 7),
        ("B200", 7),
        ("GB200", 7),
        ("B300", 7),
        ("RTX-PRO-6000-BLACKWELL", 4),
        // MIG user guide Supported GPUs: "RTX PRO 5000 Blackwell ... 48GB | 2",
        // "RTX PRO 4500 Blackwell ... 32GB | 2" (read 2026-12-03).
        ("RTX-PRO-5000-BLACKWELL", 2),
        ("RTX-PRO-4500-BLACKWELL", 2),
    ];
    for (key, max) in mig_capable {
        let mig = catalog().gpu(key).and_then(|g| g.mig.as_ref());
        assert_eq!(mig.map(|m| m.max_instances), Some(max), "{key}");
    }
    // Not in the MIG guide's Supported GPUs table (A100X/A30X are GA100 parts, but unlisted).
    for key in [
        "V100-SXM2-16GB",
        "T4",
        "A10",
        "L4",
        "L40S",
        "RTX-4090",
        "L40",
        "L20",
        "A40",
        "A16",
        "A2",
        "A100X",
        "A30X",
        "RTX-PRO-6000D",
        "GB10",
    ] {
        assert!(
            catalog().gpu(key).unwrap().mig.is_none(),
            "{key} has no MIG"
        );
    }
    let h100 = catalog()
        .gpu("H100-SXM5-80GB")
        .unwrap()
        .mig
        .as_ref()
        .unwrap();
    assert_eq!(h100.min_driver, v("525.85.12"));
    let me = h100.profile("1g.10gb+me").unwrap();
    assert!(me.media_extension);
    assert_eq!(me.placement_starts, vec![0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(
        h100.profile("3g.40gb").unwrap().placement_starts,
        vec![0, 4]
    );
    assert!(h100.profile("3g.20gb").is_none());
    let a100 = catalog()
        .gpu("A100-SXM4-40GB")
        .unwrap()
        .mig
        .as_ref()
        .unwrap();
    assert_eq!(a100.profile("1g.10gb").unwrap().min_branch, Some(525));
}

#[test]
fn gpu_facts_resolve_against_architectures() {
    let v100 = catalog().gpu("V100-SXM2-16GB").unwrap();
    let volta = catalog().architecture(&v100.architecture).unwrap();
    assert_eq!(volta.last_driver_branch, Some(580));
    assert!(volta.supported_by_branch(580));
    assert!(!volta.supported_by_branch(595));
    assert_eq!(
        v100.kernel_modules,
        KernelModuleSupport {
            open: false,
            proprietary: true
        }
    );

    let b200 = catalog().gpu("B200").unwrap();
    assert_eq!(b200.min_driver, Some(v("570.133.20")), "SKU minimum wins");
    assert!(
        !b200.kernel_modules.proprietary,
        "Blackwell needs open modules"
    );
    let gb200 = catalog().gpu("GB200").unwrap();
    assert_eq!(
        gb200.min_driver,
        Some(v("570.26")),
        "architecture minimum applies"
    );
    let gh200 = catalog().gpu("GH200-96GB").unwrap();
    assert!(!gh200.kernel_modules.proprietary, "Grace Hopper override");
    let h100 = catalog().gpu("H100-SXM5-80GB").unwrap();
    assert!(h100.kernel_modules.proprietary && h100.kernel_modules.open);

    let rtx = catalog().gpu("RTX-4090").unwrap();
    assert_eq!(rtx.segment, Segment::Consumer);
    assert_eq!(rtx.cuda_forward_compat, Some(false));
    assert!(!rtx.notes.is_empty());
}

#[test]
fn gpus_are_found_by_their_gfd_product_label() {
    let by = |label: &str| catalog().gpu_by_product(label).map(|g| g.key.as_str());
    assert_eq!(by("NVIDIA-A100-SXM4-80GB"), Some("A100-SXM4-80GB"));
    assert_eq!(by("Tesla-V100-SXM2-16GB"), Some("V100-SXM2-16GB"));
    assert_eq!(by("NVIDIA-GeForce-RTX-4090"), Some("RTX-4090"));
    assert_eq!(by("NVIDIA-H100-80GB-HBM3"), Some("H100-SXM5-80GB"));
    assert_eq!(by("A100-SXM4-40GB-MIG-1g.5gb"), Some("A100-SXM4-40GB"));
    assert_eq!(
        by("NVIDIA-A100-80GB-PCIe-MIG-1g.10gb"),
        Some("A100-PCIE-80GB")
    );
    assert_eq!(
        by("NVIDIA-H100-80GB-HBM3-MIG-INVALID"),
        Some("H100-SXM5-80GB")
    );
    assert_eq!(by("Tesla-T4-SHARED"), Some("T4"));
    assert_eq!(by("NVIDIA-A10"), Some("A10"), "not confused with A100");
    assert_eq!(by("NVIDIA-H200"), Some("H200-SXM5-141GB"));
    assert_eq!(by("NVIDIA-H200-NVL"), Some("H200-NVL-141GB"));
    assert_eq!(
        by("NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition"),
        Some("RTX-PRO-6000-BLACKWELL")
    );
    // Label values of the GPUs issue 26 added (weak evidence, marked in the rows).
    assert_eq!(by("NVIDIA-A40"), Some("A40"));
    assert_eq!(by("NVIDIA-L40"), Some("L40"), "not confused with L40S");
    assert_eq!(by("NVIDIA-L40S"), Some("L40S"));
    assert_eq!(by("NVIDIA-A2"), Some("A2"));
    assert_eq!(by("NVIDIA-GB10"), Some("GB10"));
    assert_eq!(
        by("NVIDIA-RTX-PRO-5000-Blackwell-MIG-1g.24gb"),
        Some("RTX-PRO-5000-BLACKWELL")
    );
    for unknown in [
        "",
        "-MIG-",
        "NVIDIA-A4",
        "nvidia-a10",
        "-SHARED",
        "NVIDIA-A100",
    ] {
        assert_eq!(by(unknown), None, "{unknown}");
    }
}

#[test]
fn cuda_requirements_by_minor_and_major() {
    let req = catalog().cuda(&v("12.4")).unwrap();
    assert_eq!(req.min_driver, v("550.54.14"));
    assert_eq!(req.updates[0].min_driver, v("550.54.15"));
    assert!(!req.is_major_entry());
    let mvc = req.minor_version_compat.as_ref().unwrap();
    assert_eq!(mvc.min_driver, v("525.60.13"));
    assert!(mvc.limits.iter().any(|l| l.contains("PTX JIT")));

    assert_eq!(catalog().cuda(&v("12.4.1")).unwrap().cuda, v("12.4"));
    assert_eq!(
        catalog().cuda(&v("13.0")).unwrap().min_driver,
        v("580.65.06")
    );
    assert_eq!(
        catalog().cuda(&v("11.0")).unwrap().min_driver,
        v("450.51.05")
    );
    assert!(
        catalog().cuda(&v("12.7")).is_none(),
        "there is no CUDA 12.7"
    );
    assert!(catalog().cuda(&v("14.0")).is_none());

    let major = catalog().cuda(&v("12")).unwrap();
    assert!(major.is_major_entry());
    assert_eq!(major.min_driver, v("575.51.03"), "newest 12.x is 12.9");
    assert_eq!(
        catalog()
            .cuda(&v("11"))
            .unwrap()
            .minor_version_compat
            .as_ref()
            .unwrap()
            .min_driver,
        v("450.80.02")
    );
    assert_eq!(
        catalog()
            .cuda(&v("13"))
            .unwrap()
            .minor_version_compat
            .as_ref()
            .unwrap()
            .min_driver,
        v("580")
    );

    // 13.4 is published as a branch only: any R615 driver satisfies it.
    let r615 = catalog().cuda(&v("13.4")).unwrap();
    assert_eq!(r615.support(&v("615.10.02")), CudaSupport::Full);
    assert_eq!(
        r615.support(&v("580.105.08")),
        CudaSupport::MinorVersionCompatibility
    );
    assert_eq!(req.support(&v("550.54.14")), CudaSupport::Full);
    assert_eq!(
        req.support(&v("535.104.05")),
        CudaSupport::MinorVersionCompatibility
    );
    assert_eq!(req.support(&v("470.57.02")), CudaSupport::Unsupported);

    let minors: Vec<String> = catalog()
        .cuda_releases()
        .map(|r| r.cuda.to_string())
        .collect();
    assert_eq!(minors.first().map(String::as_str), Some("11.0"));
    assert!(
        minors
            .windows(2)
            .all(|w| v::<CudaVersion>(&w[0]) < v(&w[1]))
    );
}

#[test]
fn driver_branches_and_end_of_life() {
    let r580 = catalog().driver_branch(&v("580.105.08")).unwrap();
    assert_eq!(r580.branch_type, BranchType::Lts);
    assert_eq!(r580.end_of_life, EndOfLife::Month(v("2028-06")));
    assert_eq!(
        r580.is_end_of_life(jiff::civil::date(2028, 6, 30)),
        Some(false)
    );
    assert_eq!(
        r580.is_end_of_life(jiff::civil::date(2028, 7, 1)),
        Some(true)
    );
    let r535 = catalog().driver_branch(&v("535.309.01")).unwrap();
    assert_eq!(
        r535.is_end_of_life(jiff::civil::date(2026, 8, 1)),
        Some(true)
    );
    assert_eq!(
        catalog().driver_branch(&v("550")).unwrap().end_of_life,
        EndOfLife::Reached
    );
    assert_eq!(
        catalog()
            .driver_branch(&v("615"))
            .unwrap()
            .is_end_of_life(jiff::civil::date(2030, 1, 1)),
        None
    );
    assert!(catalog().driver_branch(&v("999.1")).is_none());
    for branch in [450, 470, 535, 550, 570, 580, 590, 595, 610, 620] {
        assert!(
            catalog().driver_branches().any(|b| b.branch == branch),
            "R{branch}"
        );
    }
    let flavors = catalog().kernel_module_flavors();
    assert!(flavors.proprietary_available(580));
    assert!(!flavors.proprietary_available(620));
    assert!(!flavors.open_available(510));
}

/// One row per operator release under issue 26's rule (the final published per-version page:
/// release-24.9 / release-25.3 / release-25.10 docs branches, main for 26.x; the chart tag for
/// the default): (release, Kubernetes min, Kubernetes max, chart default driver, docs default
/// when it differs, recommended driver, validated drivers in all). Sources, per row:
/// - v24.9.x: release-24.9 life-cycle-policy.rst and platform-support.rst (final), read 2026-12-03;
/// - v25.3.x: release-25.3 life-cycle-policy.rst and platform-support.rst (final), read 2026-12-03
///   (v25.3.1 recommends 580.65.06, v25.3.3 580.82.07, v25.3.4 580.126.16 with 15 drivers);
/// - v25.10.0: its release notes and docs pull request #326 (the final page was not read);
/// - v25.10.1: release-25.10 life-cycle-policy.rst and platform-support.rst @17f2f870 (final),
///   per the 2026-12 facts audit (W2): 1.35, 580.178.04 and 21 drivers, none unconfirmed;
/// - v26.3.x: main life-cycle-policy.rst @d219c879 and @ee488781, platform-support.rst @d219c879;
/// - v26.7.0: cloud-native-docs pull requests #488/#490 (1.33-1.37), values.yaml@v26.7.0.
#[test]
fn operator_rows_follow_the_final_pages() {
    let rows = [
        // release  Kubernetes  chart default  docs default  recommended  validated drivers
        "v24.9.0    1.24-1.31   550.127.05     -             550.127.08   5",
        "v24.9.1    1.24-1.31   550.127.08     -             550.144.03   6",
        "v24.9.2    1.24-1.31   550.144.03     -             580.65.06    16",
        "v25.3.0    1.29-1.33   570.124.06     570.172.08    580.65.06    9",
        "v25.3.1    1.29-1.33   570.148.08     570.172.08    580.65.06    8",
        "v25.3.2    1.29-1.33   570.148.08     570.172.08    580.65.06    8",
        "v25.3.3    1.29-1.33   580.82.07      -             580.82.07    9",
        "v25.3.4    1.29-1.33   580.82.07      -             580.126.16   15",
        "v25.10.0   1.30-1.34   580.95.05      -             580.95.05    6",
        "v25.10.1   1.30-1.35   580.105.08     -             580.178.04   21",
        "v26.3.0    1.32-1.36   580.126.20     -             580.173.02   11",
        "v26.3.1    1.32-1.36   580.126.20     -             580.173.02   11",
        "v26.3.2    1.32-1.36   580.126.20     -             580.173.02   11",
        "v26.3.3    1.32-1.36   580.126.20     -             580.178.04   14",
        "v26.7.0    1.33-1.37   595.91.07      -             595.91.07    4",
    ];
    for row in rows {
        let [version, kube, default, docs_default, recommended, count] =
            <[&str; 6]>::try_from(row.split_whitespace().collect::<Vec<_>>()).unwrap();
        let (kube_min, kube_max) = kube.split_once('-').unwrap();
        let r = catalog().operator_release(&v(version)).unwrap();
        assert_eq!(r.kubernetes.min, v(kube_min), "{version}");
        assert_eq!(r.kubernetes.max, v(kube_max), "{version}");
        assert!(
            r.supports_kubernetes(&v(&format!("{kube_max}.1"))),
            "{version}"
        );
        let max: KubeVersionForTest = v(kube_max);
        let next = format!("{}.{}", max.major(), max.minor() + 1);
        assert!(
            !r.supports_kubernetes(&v(&next)),
            "{version} stops at {kube_max}"
        );
        assert_eq!(r.default_driver, v(default), "{version}");
        let docs_default = (docs_default != "-").then(|| v(docs_default));
        assert_eq!(r.docs_default_driver, docs_default, "{version}");
        assert_eq!(r.recommended_driver, Some(v(recommended)), "{version}");
        // v25.3.0 counts the chart default 570.124.06 as validated although the final column
        // dropped it: Helm deploys it.
        let count: usize = count.parse().unwrap();
        assert_eq!(r.drivers().len(), count, "{version}: {:?}", r.drivers());
        assert!(
            !r.source.is_empty() && r.read.is_some(),
            "{version}: every row cites its source and the date it was read"
        );
    }
    // The rows the final pages changed, in the words.
    let r = catalog().operator_release(&v("v25.10.1")).unwrap();
    assert!(
        r.supports_kubernetes(&v("1.35.0")),
        "v25.10.1 supports 1.35"
    );
    // The 2026-12 audit read the final column: two drivers added, the five unconfirmed ones
    // validated, and 580.173.02 (not in the column) gone.
    assert!(r.unconfirmed_drivers.is_empty());
    for d in [
        "610.57.04",
        "595.91.07",
        "595.71.05",
        "595.58.03",
        "580.159.03",
        "580.126.16",
    ] {
        assert!(r.supports_driver(&v(d)), "v25.10.1 validates {d}");
    }
    assert!(r.supports_driver(&v("535.309.01")));
    assert!(!r.supports_driver(&v("580.173.02")) && !r.maybe_supports_driver(&v("580.173.02")));
    assert_eq!(r.read, Some(v("2026-12-06")));
    let r = catalog().operator_release(&v("v26.3.1")).unwrap();
    assert!(
        r.supports_kubernetes(&v("1.36.0")),
        "final 26.3 page: 1.32-1.36"
    );
    let r = catalog().operator_release(&v("v25.3.0")).unwrap();
    assert!(
        r.supports_kubernetes(&v("1.33.0")),
        "final 25.3 page: 1.29-1.33"
    );

    // Validated-driver lists: "release: drivers it lists | drivers it does not".
    let lists = [
        // release-24.9 final page: 535.216.03, not the old row's 535.216.01.
        "v24.9.0: 535.216.03 550.127.08 | 535.216.01",
        "v24.9.2: 580.65.06 570.133.20 535.261.03 550.163.01 | 590.48.01",
        // release-25.3 final page: 575.57.08 and 570.158.01 in, 570.133.20 out.
        "v25.3.1: 580.65.06 575.57.08 570.158.01 570.172.08 570.148.08 | 570.133.20 580.82.07",
        "v25.3.2: 580.65.06 570.172.08 570.148.08 535.261.03 550.163.01 535.247.01 | 580.82.07 570.133.20",
        // The five v25.3.4 gained on the final page.
        "v25.3.4: 580.126.16 590.48.01 580.126.09 570.211.01 535.288.01 | 595.58.03",
        // The final release-25.10 column (2026-12 facts audit, W2): 580.173.02 is not in it.
        "v25.10.1: 610.57.04 595.91.07 595.58.03 590.48.01 580.126.09 570.211.01 535.288.01 580.105.08 580.178.04 580.167.08 | 580.173.02",
        // The five v26.3.0 gained, and 26.3.3's own additions kept out.
        "v26.3.0: 595.71.05 595.58.03 580.159.04 580.159.03 535.309.01 580.173.02 580.167.08 | 610.57.04 595.91.07 580.178.04",
        "v26.3.2: 580.173.02 580.167.08 580.159.04 | 610.57.04 595.91.07 580.178.04",
        "v26.3.3: 610.57.04 595.91.07 580.178.04 580.173.02 580.167.08 |",
    ];
    for line in lists {
        let (version, drivers) = line.split_once(": ").unwrap();
        let (listed, absent) = drivers.split_once('|').unwrap();
        let r = catalog().operator_release(&v(version)).unwrap();
        for d in listed.split_whitespace() {
            assert!(r.supports_driver(&v(d)), "{version} lists {d}");
        }
        for d in absent.split_whitespace() {
            assert!(!r.supports_driver(&v(d)), "{version} does not list {d}");
        }
    }
    // No release has unconfirmed drivers left: the last ones (v25.10.1) were read from the final
    // page.
    for r in catalog().operator_releases() {
        assert!(r.unconfirmed_drivers.is_empty(), "{}", r.version);
    }
}

/// v26.7.1 and v26.7.2: no trusted source confirms them, so the catalog says they are not
/// captured instead of holding a row.
#[test]
fn uncaptured_operator_releases_are_named() {
    let facts = catalog().operator_facts();
    for version in ["v26.7.1", "v26.7.2"] {
        assert!(
            catalog().operator_release(&v(version)).is_none(),
            "{version}"
        );
        let missing = facts.not_captured(&v(version)).unwrap();
        assert!(!missing.source.is_empty() && missing.read.is_some());
        assert!(
            missing
                .notes
                .iter()
                .any(|n| n.contains("source read for this catalog"))
        );
    }
    assert!(facts.not_captured(&v("v26.7.0")).is_none());
    // v26.7.1 likely exists (a third-party digest names it), which the entry says without
    // taking any fact from it.
    let v2671 = facts.not_captured(&v("v26.7.1")).unwrap();
    assert!(
        v2671
            .source
            .iter()
            .any(|s| s.starts_with("third-party, not authoritative"))
    );
}

/// The operating systems of each major's final platform page (issue 26, item 6).
#[test]
fn operator_os_support_per_major() {
    let facts = catalog().operator_facts();
    let os = |release: &str| facts.os_support(&v(release)).unwrap();
    // (release, id, version, listed)
    let rows: &[(&str, &str, &str, bool)] = &[
        ("v24.9.1", "ubuntu", "22.04", true),
        ("v24.9.1", "ubuntu", "24.04", false),
        ("v24.9.1", "rhel", "8.10", true),
        ("v25.3.4", "ubuntu", "24.04", true),
        ("v25.3.4", "rhel", "9.5", true),
        ("v25.10.1", "rhel", "9.5", false),
        ("v25.10.1", "ubuntu", "20.04", true),
        // The final release-25.10 page (2026-12 facts audit, W3/W4): OpenShift to 4.21, no RHEL 9.7.
        ("v25.10.0", "rhcos", "4.21", true),
        ("v25.10.1", "rhcos", "4.22", false),
        ("v25.10.1", "rhel", "9.7", false),
        ("v25.10.1", "rhel", "9.6", true),
        ("v26.3.2", "ubuntu", "20.04", false),
        ("v26.3.2", "rocky", "9.7", true),
        ("v26.7.0", "ubuntu", "26.04", true),
        ("v26.7.0", "ubuntu", "22.04.5", true),
        ("v26.7.0", "rhel", "10.2", true),
        ("v26.7.0", "rhcos", "4.22", true),
        ("v26.7.0", "rhcos", "4.17", false),
        ("v26.7.0", "windows", "2022", false),
        ("v26.7.0", "debian", "12", false),
    ];
    for (release, id, version, listed) in rows {
        assert_eq!(
            os(release).system(id, version).is_some(),
            *listed,
            "{release}: {id} {version}"
        );
    }
    let jammy = os("v26.7.0").system("ubuntu", "22.04").unwrap();
    assert!(jammy.lists_kernel((5, 15)) && jammy.lists_kernel((6, 8)));
    assert!(!jammy.lists_kernel((6, 2)));
    let p = os("v26.7.0")
        .precompiled("ubuntu", "24.04", (6, 8))
        .unwrap();
    assert_eq!(p.branches, [580, 595]);
    assert!(os("v24.9.0").precompiled.is_empty());
    // 25.10's kernel footnote (M14) and 25.3's final precompiled table (W5).
    let jammy = os("v25.10.1").system("ubuntu", "22.04").unwrap();
    assert!(jammy.lists_kernel((6, 5)) && !jammy.lists_kernel((6, 2)));
    let focal = os("v25.10.1").system("ubuntu", "20.04").unwrap();
    assert!(focal.lists_kernel((5, 4)) && !focal.lists_kernel((6, 8)));
    for (version, kernel, branches) in [
        ("22.04", (5, 15), [535_u32, 570, 580].as_slice()),
        ("22.04", (6, 8), &[535, 570, 580]),
        ("24.04", (6, 8), &[570, 580]),
    ] {
        let p = os("v25.3.4")
            .precompiled("ubuntu", version, kernel)
            .unwrap();
        assert_eq!(p.branches, branches, "25.3 {version} {kernel:?}");
    }
    for release in catalog().operator_releases() {
        assert!(
            facts.os_support(&release.version).is_some(),
            "{}",
            release.version
        );
    }
}

/// The GPUs NVIDIA's operator lists that issue 26 added, one row each: (key, architecture,
/// compute capability, memory in GB or None where unpublished, a field marked weak or None,
/// minimum driver). Sources (read 2026-12-03): developer.nvidia.com/cuda-gpus (CC), the GPU
/// Operator platform pages (1.8, 1.10, 24.x, 25.3, 26.7), pci.ids 2023.04.10, third-party
/// inventories for the weak values, k8s-launch-kit's DGX Spark preset.
#[test]
fn operator_listed_gpus() {
    let rows = [
        // key          architecture  CC    memory GB  a weak field        minimum driver
        "L40            Ada           8.9   48         memory_gb           520.61.05",
        "L20            Ada           8.9   48         memory_gb           520.61.05",
        "A40            Ampere        8.6   48         gfd_products        455.23",
        "A16            Ampere        8.6   16         memory_gb           455.23",
        "A2             Ampere        8.6   -          gfd_products        455.23",
        "A100X          Ampere        8.0   -          compute_capability  450.36.06",
        "A30X           Ampere        8.0   -          compute_capability  450.36.06",
        "RTX-PRO-6000D  Blackwell     12.0  84         memory_gb           575.57.08",
        // CC 12.1 per the CUDA GPUs page; sm_121 first in CUDA 12.9, whose driver is 575.51.03.
        "GB10           Blackwell     12.1  128        memory_gb           575.51.03",
    ];
    for row in rows {
        let [key, arch, cc, memory, weak, min_driver] =
            <[&str; 6]>::try_from(row.split_whitespace().collect::<Vec<_>>()).unwrap();
        let memory: Option<u32> = memory.parse().ok();
        let g = catalog().gpu(key).unwrap_or_else(|| panic!("{key}"));
        assert_eq!(g.architecture, arch, "{key}");
        assert_eq!(g.compute_capability, v(cc), "{key}");
        assert_eq!(g.memory_gb, memory, "{key}");
        assert!(
            g.weak.iter().any(|f| f == weak),
            "{key}: {weak} is marked weak"
        );
        assert_eq!(g.min_driver, Some(v(min_driver)), "{key}");
        assert!(g.mig.is_none(), "{key} has no MIG table");
        // The 2026-12 facts audit pinned two first releases (M10, M11); the rest are unpinned.
        let since = match key {
            "GB10" => Some("v25.3.0"),
            "RTX-PRO-6000D" => Some("v25.3.3"),
            _ => None,
        };
        assert_eq!(g.operator_since, since.map(v), "{key}");
        assert_eq!(g.operator_since_source.is_some(), since.is_some(), "{key}");
        assert!(!g.sources.is_empty(), "{key} cites its own sources");
        if g.memory_gb.is_none() {
            assert!(
                g.notes
                    .iter()
                    .any(|n| n.contains("Memory") || n.contains("memory")),
                "{key}: an unpublished fact is noted"
            );
        }
    }
    // The RTX PRO 6000D's label value is unknown: nodes cannot be matched by label, and the
    // row says so.
    let d = catalog().gpu("RTX-PRO-6000D").unwrap();
    assert!(d.gfd_products.is_empty());
    assert!(d.notes.iter().any(|n| n.contains("gpu.product")));
    // GB10 needs the open modules, as every Blackwell GPU.
    assert!(!catalog().gpu("GB10").unwrap().kernel_modules.proprietary);
}

/// The RTX PRO 5000 and 4500 Blackwell MIG tables of the MIG user guide (Supported MIG
/// Profiles, read 2026-12-03): names, counts, and what fits on the two halves.
#[test]
fn rtx_pro_5000_and_4500_mig_tables() {
    let mig = |key: &str| catalog().gpu(key).unwrap().mig.clone().unwrap();
    let r5000 = mig("RTX-PRO-5000-BLACKWELL");
    let names: Vec<&str> = r5000.profiles.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "1g.24gb",
            "1g.24gb+me",
            "1g.24gb+gfx",
            "1g.24gb+me.all",
            "1g.24gb-me",
            "2g.48gb",
            "2g.48gb+gfx"
        ]
    );
    assert_eq!(r5000.min_driver, v("575.57.08"));
    let r4500 = mig("RTX-PRO-4500-BLACKWELL");
    let names: Vec<&str> = r4500.profiles.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "1g.16gb",
            "1g.16gb+gfx",
            "1g.16gb+me.all",
            "1g.16gb-me",
            "2g.32gb",
            "2g.32gb+gfx"
        ]
    );
    assert!(
        r4500.profile("1g.16gb+me").is_none(),
        "the 4500 has only +me.all"
    );
    assert_eq!(r4500.min_driver, v("575.64"));
    // (layout, fits)
    let layouts: &[(&[(&str, u32)], bool)] = &[
        (&[("1g.24gb", 2)], true),
        (&[("2g.48gb", 1)], true),
        (&[("1g.24gb+me", 1), ("1g.24gb-me", 1)], true),
        (&[("1g.24gb", 3)], false),
        (&[("2g.48gb", 1), ("1g.24gb", 1)], false),
        (&[("1g.24gb+me", 1), ("1g.24gb+me.all", 1)], false),
    ];
    for (layout, fits) in layouts {
        assert_eq!(r5000.fit(layout).is_ok(), *fits, "{layout:?}");
    }
    assert!(r5000.fit(&[("3g.48gb", 1)]).is_err(), "invented profile");
}

/// Rubin: what is published (compute capability 10.7 in the CUDA 13.4 notes, preview, the R615
/// floor; GFD labels 10.x `blackwell` and keeps `rubin` for major 13) and what is not; no GPU row
/// uses it. The 2026-12 facts audit (W1, D2, M8) corrected the earlier reading of Rubin as
/// major 13.
#[test]
fn rubin_is_recorded_as_preview() {
    let rubin = catalog().architecture("Rubin").unwrap();
    assert_eq!(rubin.compute_capabilities, [v::<ComputeCapability>("10.7")]);
    assert_eq!(rubin.gfd_family, "blackwell");
    let reserved = rubin.gfd_reserved.as_ref().unwrap();
    assert_eq!(
        (reserved.compute_major, reserved.family.as_str()),
        (13, "rubin")
    );
    assert!(rubin.preview);
    assert_eq!(rubin.min_driver.as_ref().map(|d| d.branch()), Some(615));
    assert!(rubin.kernel_modules.is_none());
    assert!(!rubin.unpublished.iter().any(|u| u.contains("driver floor")));
    assert!(rubin.unpublished.iter().any(|u| u.contains("product")));
    for (cc, arch) in [
        ("10.7", Some(("Rubin", "blackwell"))),
        ("10.0", Some(("Blackwell", "blackwell"))),
        ("12.1", Some(("Blackwell", "blackwell"))),
        ("9.0", Some(("Hopper", "hopper"))),
        ("8.9", Some(("Ada", "ada-lovelace"))),
        ("8.6", Some(("Ampere", "ampere"))),
        ("13.0", None),
        ("14.0", None),
    ] {
        assert_eq!(
            catalog()
                .architecture_for(v(cc))
                .map(|a| (a.name.as_str(), a.gfd_family.as_str())),
            arch,
            "{cc}"
        );
    }
    assert!(!catalog().gpus().any(|g| g.architecture == "Rubin"));
}

/// Network facts of issue 26: what NVIDIA's GPUDirect RDMA page documents for DMA-BUF (no
/// operator floor), and per Network Operator release its documented Kubernetes range and the
/// DOCA-OFED driver it ships (images-sha256 and platform-support pages, read 2026-12-03).
#[test]
fn network_facts_are_the_documented_ones() {
    let rdma = &catalog().network().gpudirect_rdma;
    assert!(rdma.dma_buf.open_kernel_modules);
    assert_eq!(rdma.dma_buf.min_cuda, "11.7");
    assert_eq!(rdma.dma_buf.min_architecture, "Turing");
    assert_eq!(rdma.dma_buf.min_kernel, "5.12");
    assert_eq!(
        catalog().cuda(&v("11.7")).unwrap().min_driver,
        v("515.43.04"),
        "DMA-BUF's driver floor follows from CUDA 11.7"
    );
    let no = &catalog().network().network_operator;
    // (release, Kubernetes min, max, DOCA-OFED driver shipped)
    let rows = [
        ("v26.4.0", "1.31", "1.35", "doca3.4.0-26.04-0.8.6.0-0"),
        ("v26.4.1", "1.31", "1.35", "doca3.4.1-26.04-1.1.0.0-1"),
        ("v26.7.0", "1.32", "1.36", "doca3.5.0-26.07-0.7.7.0-1"),
    ];
    for (version, min, max, doca) in rows {
        let r = no.release(version).unwrap_or_else(|| panic!("{version}"));
        let k = r.kubernetes.as_ref().unwrap();
        assert_eq!(k.min, v::<KubeVersionForTest>(min), "{version}");
        assert_eq!(k.max, v::<KubeVersionForTest>(max), "{version}");
        assert_eq!(r.doca_driver, doca, "{version}");
        assert!(!r.source.is_empty() && r.read.is_some(), "{version}");
    }
    // The chart's kubeVersion is kept apart: it is an install guard, not a support range.
    let r = no.release("v26.4.1").unwrap();
    assert_eq!(r.chart_kube_version.as_deref(), Some(">= 1.21.0-0"));
    assert!(!r.kubernetes.as_ref().unwrap().contains(&v("1.21.0")));
    assert_eq!(
        no.release("v26.7.0")
            .unwrap()
            .doca_driver_precompiled
            .as_deref(),
        Some("doca3.5.0-26.07-0.7.7.0-0")
    );
    // The GA docs' LTS DOCA-OFED for 26.4.x (2026-12 facts audit, W6), not the beta's 24.10.
    for version in ["v26.4.0", "v26.4.1"] {
        let r = no.release(version).unwrap();
        assert_eq!(
            r.doca_driver_lts.as_deref(),
            Some("doca3.2.2-25.10-2.4.1.0-4"),
            "{version}"
        );
    }
    // v26.7.1 and v26.10.0 exist but are not rows (no Kubernetes range or DOCA tag read); the
    // notes say so instead of "no patch release".
    assert!(no.release("v26.7.1").is_none() && no.release("v26.10.0").is_none());
    let notes = no.notes.join(" ");
    assert!(
        notes.contains("v26.7.1") && notes.contains("v26.10.0"),
        "{notes}"
    );
    let r = no.release("v26.7.0").unwrap();
    assert!(!r.notes.iter().any(|n| n.contains("No v26.7.x patch")));
}

/// Issue 26 item 5: every fact row of every table carries its sources and the date they were
/// read, and no table is left undated.
#[test]
fn every_fact_row_has_a_source_and_a_read_date() {
    let rows = catalog().fact_rows();
    assert!(rows.len() > 100, "{}", rows.len());
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| r.sources.iter().all(|s| s.trim().is_empty()) || r.read.is_none())
        .map(|r| format!("{} {}", r.file, r.row))
        .collect();
    assert!(
        bad.is_empty(),
        "rows without a source or a read date: {bad:#?}"
    );
    for file in [
        GPUS_FILE,
        CUDA_FILE,
        DRIVERS_FILE,
        ARCHITECTURES_FILE,
        OPERATOR_FILE,
        NETWORK_FILE,
        LIMITS_FILE,
        QUEUEING_FILE,
        DCGM_FILE,
    ] {
        assert!(rows.iter().any(|r| r.file == file), "{file} has no rows");
    }
    assert_eq!(catalog().undated_files(), Vec::<&str>::new());
    // Every section of the tables dated per section is a row of its own, so a section whose
    // date is removed is reported rather than covered by its neighbours.
    for row in ["node_pools", "scheduling_messages", "xid", "alert_bounds"] {
        assert!(rows.iter().any(|r| r.row == row), "{row}");
    }
    for row in [
        "releases.v25.10.1",
        "gpus.GB10",
        "architectures.Rubin",
        "network_operator.releases.v26.7.0",
    ] {
        assert!(rows.iter().any(|r| r.row == row), "{row}");
    }
}

/// Issue 39 (facts round 5): every row the 2026-12 facts audit's fixes touched was read on the
/// audit's day, so `gpuctl profiles --stale-after 0 --today 2026-12-06` lists none of them.
#[test]
fn rows_of_the_december_audit_are_not_stale_on_its_day() {
    const AUDIT_DAY: &str = "2026-12-06";
    let day: PartialDate = v(AUDIT_DAY);
    let stale: Vec<(&str, &str)> = catalog()
        .stale_rows(day.first_day(), 0)
        .into_iter()
        .map(|r| (r.file, r.row.as_str()))
        .collect();
    let touched = [
        ("architectures", "architectures.Rubin"),
        ("gpu-operator", "releases.v25.10.1"),
        ("gpu-operator", "releases.v26.7.0"),
        ("gpu-operator", "not_captured.v26.7.1"),
        ("gpu-operator", "not_captured.v26.7.2"),
        ("gpu-operator", "os_support.25.3"),
        ("gpu-operator", "os_support.25.10"),
        ("network", "network_operator"),
        ("network", "network_operator.releases.v26.4.0"),
        ("network", "network_operator.releases.v26.4.1"),
        ("network", "network_operator.releases.v26.7.0"),
        ("dra", "kubernetes"),
        ("dra", "driver"),
        ("dra", "driver.releases.v0.5.1"),
        ("dcgm", "xid"),
        ("gpus", "gpus.GB300"),
        ("gpus", "gpus.GB10"),
        ("gpus", "gpus.RTX-PRO-6000D"),
    ];
    let rows = catalog().fact_rows();
    for (file, row) in touched {
        let r = rows
            .iter()
            .find(|r| r.file.contains(file) && r.row == row)
            .unwrap_or_else(|| panic!("{file}: {row} is a fact row"));
        assert_eq!(r.read, Some(day), "{file}: {row}");
        assert!(!stale.contains(&(r.file, row)), "{file}: {row} is stale");
    }
    // Rows the audit did not touch keep their older dates (and so are listed).
    assert!(stale.iter().any(|(_, row)| *row == "gpus.V100-SXM2-16GB"));
}

/// A row without a source or a date fails the check above: strip them from one row and the
/// loader still loads (the date is optional per row) but the row is reported.
#[test]
fn an_undated_row_is_caught() {
    let text: &'static str = Box::leak(
        ProfileSources::EMBEDDED
            .architectures
            .replacen("read: \"2026-11\"\n", "", 1)
            .into_boxed_str(),
    );
    let src = ProfileSources {
        architectures: text,
        ..ProfileSources::EMBEDDED
    };
    let c = Catalog::from_sources(&src).unwrap();
    let undated: Vec<&str> = c
        .fact_rows()
        .iter()
        .filter(|r| r.read.is_none())
        .map(|r| r.row.as_str())
        .collect();
    assert!(undated.contains(&"architectures.Volta"), "{undated:?}");
    assert!(
        !undated.contains(&"architectures.Rubin"),
        "Rubin has its own date"
    );
    let today = jiff::civil::date(2026, 12, 3);
    assert!(
        c.stale_rows(today, 10_000)
            .iter()
            .any(|r| r.row == "architectures.Volta")
    );
}

/// `--stale-after`: ages count from the earliest day a date can mean.
#[test]
fn stale_rows_by_age() {
    let today = jiff::civil::date(2026, 12, 3);
    let ages = |days| -> Vec<String> {
        catalog()
            .stale_rows(today, days)
            .iter()
            .map(|r| r.row.clone())
            .collect()
    };
    // "2026-11" counts from 2026-11-01 (32 days); rows read 2026-12-03 are 0 days old.
    assert!(ages(31).iter().any(|r| r == "gpus.V100-SXM2-16GB"));
    assert!(!ages(32).iter().any(|r| r == "gpus.V100-SXM2-16GB"));
    assert!(!ages(0).iter().any(|r| r == "releases.v25.10.1"));
    assert!(ages(400).is_empty());
    let row = catalog()
        .fact_rows()
        .iter()
        .find(|r| r.row == "gpus.L40")
        .unwrap();
    assert_eq!(row.age_days(today), Some(0));
    assert_eq!(row.age_days(jiff::civil::date(2027, 1, 2)), Some(30));
}

/// The GPUs added for late-2026 clusters, with their label values, MIG tables and the first
/// operator release that supports them.
#[test]
fn added_gpus_and_first_operator_releases() {
    // (key, a GFD product value, MIG profile set, first operator release)
    let rows: &[(&str, &str, Option<&str>, Option<&str>)] = &[
        (
            "GB300",
            "NVIDIA-GB300",
            Some("gb300-278gb"),
            Some("v25.10.0"),
        ),
        (
            "GH200-144GB",
            "NVIDIA-GH200-144G-HBM3e",
            Some("gh200-144gb"),
            None,
        ),
        (
            "RTX-PRO-5000-BLACKWELL",
            "NVIDIA-RTX-PRO-5000-Blackwell",
            Some("rtx-pro-5000-48gb"),
            None,
        ),
        (
            "RTX-PRO-4500-BLACKWELL",
            "NVIDIA-RTX-PRO-4500-Blackwell",
            Some("rtx-pro-4500-32gb"),
            Some("v26.3.0"),
        ),
        (
            "H100-SXM5-94GB",
            "NVIDIA-H100-SXM5-94GB",
            Some("h100-94gb"),
            None,
        ),
        ("A800-SXM4-80GB", "NVIDIA-A800-SXM4-80GB", None, None),
        ("H800-SXM5-80GB", "NVIDIA-H800", None, None),
        ("B200", "NVIDIA-B200", Some("b200-180gb"), Some("v25.3.0")),
        (
            "GB200",
            "NVIDIA-GB200",
            Some("gb200-186gb"),
            Some("v25.3.0"),
        ),
        (
            "B300",
            "NVIDIA-B300-SXM6-AC",
            Some("b300-288gb"),
            Some("v25.10.0"),
        ),
    ];
    for (key, product, set, since) in rows {
        let gpu = catalog()
            .gpu(key)
            .unwrap_or_else(|| panic!("{key} is in the catalog"));
        assert!(gpu.gfd_products.iter().any(|p| p == product), "{key}");
        assert_eq!(
            catalog().gpu_by_product(product).map(|g| g.key.as_str()),
            Some(*key)
        );
        assert_eq!(
            gpu.mig.as_ref().map(|m| m.profile_set.as_str()),
            *set,
            "{key}"
        );
        assert_eq!(gpu.operator_since, since.map(v), "{key}");
        if since.is_some() {
            assert!(
                gpu.operator_since_source.is_some(),
                "{key} cites its source"
            );
        }
    }
    // GB300's MIG floor is the MIG guide's 595.58.03 (R595): its only GB300 row is the DGX
    // Station's, which shares the NVL72 GB300's PCI id, so the key cannot tell them apart and takes
    // the stricter floor (2026-12 facts audit, D1/M12; the old 580.95.05 was v25.10.0's driver).
    let gb300 = catalog().gpu("GB300").unwrap().mig.as_ref().unwrap();
    assert_eq!(gb300.min_driver, v("595.58.03"));
    let since = catalog()
        .gpu("GB300")
        .unwrap()
        .operator_since
        .clone()
        .unwrap();
    let added = catalog().operator_release(&since).unwrap();
    assert!(!added.supports_driver(&gb300.min_driver));
    let next = catalog().operator_release(&v("v25.10.1")).unwrap();
    assert!(next.supports_driver(&gb300.min_driver));
    let names: Vec<&str> = gb300.profiles.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "1g.35gb",
            "1g.35gb+me",
            "1g.70gb",
            "2g.70gb",
            "3g.139gb",
            "4g.139gb",
            "7g.278gb"
        ]
    );
    let gh200 = catalog().gpu("GH200-144GB").unwrap();
    assert!(!gh200.kernel_modules.proprietary);
    let names: Vec<&str> = gh200
        .mig
        .as_ref()
        .unwrap()
        .profiles
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "1g.18gb",
            "1g.18gb+me",
            "1g.36gb",
            "2g.36gb",
            "3g.72gb",
            "4g.72gb",
            "7g.144gb"
        ]
    );
    // MIG on the RTX PRO 6000 Blackwell: from operator v25.3.4; the GPU itself has no recorded
    // first release.
    let rtx = catalog().gpu("RTX-PRO-6000-BLACKWELL").unwrap();
    assert_eq!(rtx.operator_since, None);
    assert_eq!(rtx.mig.as_ref().unwrap().operator_since, Some(v("v25.3.4")));
    assert!(
        rtx.operator_since_source
            .as_deref()
            .unwrap()
            .contains("v25.3.4")
    );
}

/// The RTX PRO 6000 Blackwell's placements are on the 12-unit axis `nvidia-smi mig -lgipp`
/// prints, and every layout fits there exactly when it fits on the quarter axis (starts and
/// widths divided by 3).
#[test]
fn rtx_pro_6000_placement_axis_is_nvidia_smis() {
    let mig = catalog()
        .gpu("RTX-PRO-6000-BLACKWELL")
        .unwrap()
        .mig
        .clone()
        .unwrap();
    assert_eq!(mig.memory_slices, 12);
    let lgipp = |name: &str| {
        let p = mig.profile(name).unwrap();
        (p.placement_starts.clone(), p.memory_slices)
    };
    assert_eq!(lgipp("1g.24gb"), (vec![0, 3, 6, 9], 3));
    assert_eq!(lgipp("2g.48gb"), (vec![0, 6], 6));
    assert_eq!(lgipp("4g.96gb"), (vec![0], 12));

    let mut quarter = mig.clone();
    quarter.memory_slices = 4;
    for p in &mut quarter.profiles {
        p.memory_slices /= 3;
        p.placement_starts = p.placement_starts.iter().map(|s| s / 3).collect();
    }
    let names: Vec<String> = mig.profiles.iter().map(|p| p.name.clone()).collect();
    // Every combination of up to two profiles with 0..=4 instances each.
    let mut checked = 0;
    for a in &names {
        for b in &names {
            for na in 0..=4u32 {
                for nb in 0..=4u32 {
                    let layout: Vec<(&str, u32)> = if a == b {
                        vec![(a.as_str(), na + nb)]
                    } else {
                        vec![(a.as_str(), na), (b.as_str(), nb)]
                    };
                    let wide = mig.fit(&layout).is_ok();
                    assert_eq!(wide, quarter.fit(&layout).is_ok(), "{layout:?}");
                    checked += usize::from(wide);
                }
            }
        }
    }
    assert!(
        checked > 50,
        "the comparison covered fitting layouts too ({checked})"
    );
    assert!(mig.fit(&[("1g.24gb", 2), ("2g.48gb", 1)]).is_ok());
    assert!(mig.fit(&[("4g.96gb", 1), ("1g.24gb", 1)]).is_err());
}

#[test]
fn operator_releases_cover_v24_9_to_v26_7() {
    let versions: Vec<String> = catalog()
        .operator_releases()
        .map(|r| r.version.to_string())
        .collect();
    assert_eq!(versions.first().map(String::as_str), Some("v24.9.0"));
    assert_eq!(versions.last().map(String::as_str), Some("v26.7.0"));
    for version in ["v24.9.2", "v25.3.4", "v25.10.1", "v26.3.3"] {
        assert!(versions.iter().any(|x| x == version), "{version}");
    }

    let latest = catalog().operator_release(&v("v26.7")).unwrap();
    assert_eq!(latest.default_driver, v("595.91.07"));
    assert!(latest.supports_kubernetes(&v("1.34.2")));
    assert!(latest.supports_kubernetes(&v("v1.36")));
    // cloud-native-docs pull request #488 (2026-09-04) documents Kubernetes 1.37 for 26.7.0.
    assert!(latest.supports_kubernetes(&v("1.37.0")));
    assert!(!latest.supports_kubernetes(&v("1.32.9")));
    assert!(latest.supports_driver(&v("580.173.02")));
    assert!(!latest.supports_driver(&v("580.105.08")));
    assert_eq!(latest.driver_branches(), vec![610, 595, 580, 535]);
    assert_eq!(latest.support, Some(OperatorSupport::Supported));
    assert!(catalog().operator_release(&v("v26.7.1")).is_none());
    assert_eq!(
        catalog()
            .operator_facts()
            .kernel_module_type
            .auto_min_driver,
        v("570.86.15")
    );

    // Every default driver belongs to a branch drivers.yaml knows.
    for release in catalog().operator_releases() {
        for driver in release.drivers() {
            assert!(
                catalog().driver_branch(driver).is_some(),
                "{}: {driver}",
                release.version
            );
        }
    }
}

#[test]
fn limits_are_data() {
    let limits = catalog().limits();
    assert_eq!(limits.priority_class.max_user_value, 1_000_000_000);
    assert_eq!(limits.priority_class.reserved_name_prefix, "system-");
    assert_eq!(limits.kueue.max_resource_groups, 16);
    assert_eq!(limits.kueue.max_flavors_per_group, 64);
    assert_eq!(limits.kueue.max_cohort_depth, None);
    assert_eq!(
        (
            limits.volcano.min_queue_weight,
            limits.volcano.max_queue_weight
        ),
        (1, 65535)
    );
    assert_eq!(limits.volcano.max_queue_depth, 5);
    assert_eq!(limits.dcgm_exporter.min_collect_interval_ms, 100);
    assert_eq!(limits.kubernetes_names.dns1123_label_max_length, 63);
    assert_eq!(limits.kubernetes_names.dns1123_subdomain_max_length, 253);
    assert_eq!(limits.device_plugin.min_sharing_replicas, 2);
    let quota = &limits.resource_quota;
    assert!(
        quota.is_standard_key("requests.cpu") && quota.is_standard_key("requests.hugepages-2Mi")
    );
    assert!(!quota.is_standard_key("gpu") && !quota.is_standard_key("limits.storage"));
    let labels = &limits.node_labels;
    assert!(labels.is_operator_owned("nvidia.com/gpu.product"));
    assert!(labels.is_operator_owned("feature.node.kubernetes.io/pci-10de.present"));
    assert!(labels.is_operator_owned("nvidia.com/mig-1g.10gb.count"));
    assert!(!labels.is_operator_owned("nvidia.com/mig.config"));
    assert!(!labels.is_operator_owned("nvidia.com/device-plugin.config"));
    assert!(!labels.is_operator_owned("gpu.example.com/tier"));
}

#[test]
fn every_table_cites_its_sources() {
    let sources = catalog().sources();
    for file in [
        GPUS_FILE,
        CUDA_FILE,
        DRIVERS_FILE,
        ARCHITECTURES_FILE,
        OPERATOR_FILE,
        LIMITS_FILE,
        QUEUEING_FILE,
    ] {
        assert!(
            sources.iter().any(|(f, _)| *f == file),
            "{file} cites nothing"
        );
    }
    assert!(
        sources
            .iter()
            .any(|(_, s)| s.starts_with("mig_profile_sets.a100-40gb: "))
    );
    assert!(sources.iter().any(|(_, s)| s.starts_with("kueue: ")));
    assert!(
        sources
            .iter()
            .all(|(_, s)| !s.is_empty() && !s.contains('\n'))
    );
}

/// Broken tables are rejected with the file and entry named, never with a panic.
#[test]
fn inconsistent_tables_are_rejected() {
    let with = |patch: fn(&mut ProfileSources<'static>, &'static str), text: &'static str| {
        let mut src = ProfileSources::EMBEDDED;
        patch(&mut src, text);
        Catalog::from_sources(&src).unwrap_err().to_string()
    };
    let gpus_leaked = |from: &str, to: &str| -> &'static str {
        Box::leak(
            ProfileSources::EMBEDDED
                .gpus
                .replacen(from, to, 1)
                .into_boxed_str(),
        )
    };

    let err = with(
        |s, t| s.gpus = t,
        gpus_leaked("architecture: Volta", "architecture: Votla"),
    );
    assert!(err.contains("unknown architecture `Votla`"), "{err}");

    let err = with(
        |s, t| s.gpus = t,
        gpus_leaked("placement_starts: [0, 4] }", "placement_starts: [0, 5] }"),
    );
    assert!(err.contains("runs past the last slot"), "{err}");

    let err = with(
        |s, t| s.gpus = t,
        gpus_leaked("display_name:", "display_nam:"),
    );
    assert!(
        err.starts_with("cannot parse `profiles/gpus.yaml`"),
        "{err}"
    );

    let err = with(|s, t| s.cuda = t, "releases: []\n");
    assert!(
        err.starts_with("cannot parse `profiles/cuda.yaml`"),
        "{err}"
    );

    let err = with(|s, t| s.limits = t, "");
    assert!(err.contains("profiles/limits.yaml"), "{err}");

    let unordered: &'static str = Box::leak(
        ProfileSources::EMBEDDED
            .queueing
            .replacen("line: v0.13,", "line: v0.20,", 1)
            .into_boxed_str(),
    );
    let err = with(|s, t| s.queueing = t, unordered);
    assert!(err.contains("profiles/queueing.yaml"), "{err}");
    assert!(err.contains("not in ascending order"), "{err}");

    let bad_driver: &'static str = Box::leak(
        ProfileSources::EMBEDDED
            .gpu_operator
            .replacen("\"595.91.07\"", "\"595..91\"", 1)
            .into_boxed_str(),
    );
    let err = with(|s, t| s.gpu_operator = t, bad_driver);
    assert!(err.contains("invalid driver version `595..91`"), "{err}");

    // Issue 26's shapes: each broken one is refused with the entry named.
    let patched = |text: &str, from: &str, to: &str| -> &'static str {
        assert!(text.contains(from), "{from}");
        Box::leak(text.replacen(from, to, 1).into_boxed_str())
    };
    let op = ProfileSources::EMBEDDED.gpu_operator;
    let err = with(
        |s, t| s.gpu_operator = t,
        patched(op, "  - majors: [\"26.3\"]", "  - majors: [\"26.4\"]"),
    );
    assert!(err.contains("os_support entries cover its major"), "{err}");
    let err = with(
        |s, t| s.gpu_operator = t,
        patched(
            op,
            "    other_drivers: [\"610.57.04\"",
            "    unconfirmed_drivers: [\"580.105.08\"]\n    other_drivers: [\"610.57.04\"",
        ),
    );
    assert!(
        err.contains("580.105.08 is both validated and unconfirmed"),
        "{err}"
    );
    let err = with(
        |s, t| s.gpu_operator = t,
        patched(
            op,
            "{ id: ubuntu, version: \"24.04\", kernel: \"6.8\", branches: [580, 595] }",
            "{ id: ubuntu, version: \"24.04\", kernel: \"6.8\", branches: [580, 597] }",
        ),
    );
    assert!(err.contains("R597 is not in drivers.yaml"), "{err}");
    let err = with(
        |s, t| s.gpu_operator = t,
        patched(op, "versions: [\"v26.7.1\"]", "versions: [\"v26.7.0\"]"),
    );
    assert!(err.contains("both a release and not_captured"), "{err}");
    let err = with(
        |s, t| s.gpus = t,
        gpus_leaked(
            "weak: [memory_gb, memory_type, gfd_products]",
            "weak: [memroy_gb]",
        ),
    );
    assert!(err.contains("`weak` names `memroy_gb`"), "{err}");
    let err = with(
        |s, t| s.gpus = t,
        gpus_leaked("gfd_products: [\"NVIDIA-L40\"]", "gfd_products: []"),
    );
    assert!(err.contains("GPU `L40` lists no gfd_products"), "{err}");
    let err = with(
        |s, t| s.network = t,
        patched(
            ProfileSources::EMBEDDED.network,
            "min_architecture: Turing",
            "min_architecture: Turning",
        ),
    );
    assert!(err.contains("min_architecture `Turning`"), "{err}");
    let err = with(
        |s, t| s.network = t,
        patched(
            ProfileSources::EMBEDDED.network,
            "min_cuda: \"11.7\"",
            "min_cuda: \"11.9\"",
        ),
    );
    assert!(err.contains("min_cuda `11.9`"), "{err}");
    let err = with(
        |s, t| s.architectures = t,
        patched(
            ProfileSources::EMBEDDED.architectures,
            "compute_major: 13",
            "compute_major: 12",
        ),
    );
    assert!(err.contains("major 12 is reserved by `Rubin`"), "{err}");
}
/// `profiles/dcgm.yaml`: the classes the alerts and doctor rely on, and broken tables refused.
#[test]
fn dcgm_facts() {
    use dcgm::XidClass;
    let d = catalog().dcgm();
    assert_eq!(d.xid.of_class(XidClass::OffBus), [79]);
    assert!(d.xid.of_class(XidClass::Hardware).contains(&48));
    assert!(d.xid.of_class(XidClass::Application).contains(&13));
    assert!(d.xid.url().starts_with("https://docs.nvidia.com/"));
    assert_eq!(d.clock_events.faults_in(64 | 1), ["hw_thermal"]);
    let broken = super::dcgm::broken_for_test;
    let e = broken("{ xid: 31,", "{ xid: 13,");
    assert!(e.contains("xid 13 is listed twice"), "{e}");
    let e = broken("bit: 64,", "bit: 65,");
    assert!(e.contains("not a single bit"), "{e}");
    let e = broken("gpu_temp: DCGM_FI_DEV_GPU_TEMP", "gpu_temp: DCGM-GPU-TEMP");
    assert!(e.contains("not a Prometheus metric name"), "{e}");
    let e = broken("idle_window: 1h", "idle_window: soon");
    assert!(
        e.contains("profiles/dcgm.yaml") && e.contains("idle_window"),
        "{e}"
    );
    let e = broken("pod: [exported_pod, pod]", "pod: []");
    assert!(e.contains("exporter.labels.pod names no label"), "{e}");
}
