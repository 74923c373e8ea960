//! Locks as plain data: who holds a `coordination.k8s.io/v1` Lease and for how long, and who this
//! run is. `gpuctl apply` takes one Lease per blueprint (beside its ApplySet parent), a driver
//! upgrade one per pool; the cluster crate takes, renews and releases them, this module only
//! describes them so plans, status output and error messages say the same thing.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use serde::Serialize;

/// Annotation on a lock Lease: the kubeconfig user of the run that holds it.
pub const USER_ANNOTATION: &str = "gpuctl.dev/lock-user";
/// Annotation on a lock Lease: the host the holding run runs on.
pub const HOST_ANNOTATION: &str = "gpuctl.dev/lock-host";
/// Annotation on a lock Lease: the CI job of the holding run, when it runs in one.
pub const CI_ANNOTATION: &str = "gpuctl.dev/lock-ci-job";
/// Annotation on a lock Lease: what the holder does (`apply`, `upgrade driver`, ...).
pub const COMMAND_ANNOTATION: &str = "gpuctl.dev/lock-command";

/// Longest value gpuctl writes into a lock annotation (environment values are not trusted to be
/// short).
const MAX_VALUE: usize = 256;

/// Who takes a lock: written on the Lease so whoever finds it held knows whom to ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    /// Unique per run: `host/pid-N/nonce`, the Lease's `holderIdentity`.
    pub identity: String,
    /// The kubeconfig user (the context's user entry), when known.
    pub user: Option<String>,
    /// Host name.
    pub host: String,
    /// CI job, when the environment names one ([`ci_job`]).
    pub ci: Option<String>,
    /// What the run does.
    pub command: String,
}

impl Holder {
    /// This run: `host` and `pid` identify it, `nonce` tells two runs of one pid apart.
    pub fn new(
        command: &str,
        user: Option<&str>,
        host: &str,
        pid: u32,
        nonce: u32,
        env: impl Fn(&str) -> Option<String>,
    ) -> Holder {
        Holder {
            identity: format!("{}/pid-{pid}/{nonce:08x}", clip(host)),
            user: user.map(clip),
            host: clip(host),
            ci: ci_job(env),
            command: clip(command),
        }
    }

    /// The annotations that record this holder on its Lease.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut a = BTreeMap::new();
        a.insert(HOST_ANNOTATION.to_string(), self.host.clone());
        a.insert(COMMAND_ANNOTATION.to_string(), self.command.clone());
        if let Some(u) = &self.user {
            a.insert(USER_ANNOTATION.to_string(), u.clone());
        }
        if let Some(c) = &self.ci {
            a.insert(CI_ANNOTATION.to_string(), c.clone());
        }
        a
    }
}

/// The CI job this process runs in, from the variables each CI system documents; `None` outside
/// CI. Only job identifiers and URLs are read, never tokens.
///
/// Sources: GitHub Actions "Variables reference" (docs.github.com/en/actions/reference/variables-reference),
/// GitLab "Predefined CI/CD variables" (docs.gitlab.com/ci/variables/predefined_variables),
/// Jenkins "Using environment variables" (www.jenkins.io/doc/book/pipeline/jenkinsfile),
/// Buildkite "Environment variables" (buildkite.com/docs/pipelines/configure/environment-variables),
/// CircleCI "Project values and variables" (circleci.com/docs/reference/variables),
/// Azure Pipelines "Predefined variables" (learn.microsoft.com/azure/devops/pipelines/build/variables).
pub fn ci_job(env: impl Fn(&str) -> Option<String>) -> Option<String> {
    let get = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    let found = if get("GITHUB_ACTIONS").is_some() {
        match (
            get("GITHUB_SERVER_URL"),
            get("GITHUB_REPOSITORY"),
            get("GITHUB_RUN_ID"),
        ) {
            (Some(s), Some(r), Some(id)) => {
                let attempt = get("GITHUB_RUN_ATTEMPT").unwrap_or_else(|| "1".into());
                Some(format!("{s}/{r}/actions/runs/{id}/attempts/{attempt}"))
            }
            _ => Some("GitHub Actions".into()),
        }
    } else if get("GITLAB_CI").is_some() {
        get("CI_JOB_URL").or_else(|| get("CI_JOB_ID").map(|id| format!("GitLab job {id}")))
    } else if let Some(url) = get("BUILDKITE_BUILD_URL") {
        Some(match get("BUILDKITE_JOB_ID") {
            Some(job) => format!("{url}#{job}"),
            None => url,
        })
    } else if let Some(url) = get("CIRCLE_BUILD_URL") {
        Some(url)
    } else if get("JENKINS_URL").is_some() {
        get("BUILD_URL").or_else(|| get("BUILD_TAG"))
    } else if get("TF_BUILD").is_some() {
        get("BUILD_BUILDID").map(|id| format!("Azure Pipelines build {id}"))
    } else if get("CI").is_some_and(|v| v != "false" && v != "0") {
        Some("CI".into())
    } else {
        None
    };
    found.map(|s| clip(&s))
}

/// Trims, drops control characters and bounds a value written into a Lease.
fn clip(s: &str) -> String {
    s.trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_VALUE)
        .collect()
}

/// Who holds a Lease now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaseInfo {
    /// Holder identity (empty when released).
    pub holder: String,
    /// Seconds since the last renewal.
    pub age_s: i64,
    /// Lease duration (seconds).
    pub duration_s: i64,
    /// Seconds since the holder took it, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_s: Option<i64>,
    /// The holder's kubeconfig user, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The holder's host, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The holder's CI job, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci: Option<String>,
    /// What the holder does, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

impl LeaseInfo {
    /// Held by a live run (renewed within its duration).
    pub fn live(&self) -> bool {
        !self.holder.is_empty() && self.age_s < self.duration_s
    }

    /// Plain-data view of a Lease at time `now`.
    pub fn of(l: &Lease, now: k8s_openapi::jiff::Timestamp) -> LeaseInfo {
        let spec = l.spec.clone().unwrap_or_default();
        let since = |t: Option<k8s_openapi::jiff::Timestamp>| {
            t.map(|t| {
                (now - t)
                    .total(k8s_openapi::jiff::Unit::Second)
                    .map_or(i64::MAX, |s| s.floor() as i64)
            })
        };
        let renewed = spec
            .renew_time
            .as_ref()
            .or(spec.acquire_time.as_ref())
            .map(|t| t.0);
        let annotations = l.metadata.annotations.clone().unwrap_or_default();
        let note = |k: &str| annotations.get(k).map(|v| clip(v));
        LeaseInfo {
            holder: spec.holder_identity.unwrap_or_default(),
            age_s: since(renewed).unwrap_or(i64::MAX),
            duration_s: i64::from(spec.lease_duration_seconds.unwrap_or(0)),
            held_s: since(spec.acquire_time.map(|t| t.0)),
            user: note(USER_ANNOTATION),
            host: note(HOST_ANNOTATION),
            ci: note(CI_ANNOTATION),
            command: note(COMMAND_ANNOTATION),
        }
    }

    /// `holder` with what the Lease records about it: `gpuctl apply by alice on ci-7 (job URL),
    /// held 42s, renewed 3s ago`.
    pub fn describe(&self) -> String {
        let mut s = match &self.command {
            Some(c) => format!("gpuctl {c}"),
            None => "gpuctl".to_string(),
        };
        if let Some(u) = &self.user {
            s.push_str(&format!(" by {u}"));
        }
        match &self.host {
            Some(h) => s.push_str(&format!(" on {h}")),
            None => s.push_str(&format!(" ({})", self.holder)),
        }
        if let Some(c) = &self.ci {
            s.push_str(&format!(" in {c}"));
        }
        if let Some(h) = self.held_s.filter(|h| *h != i64::MAX) {
            s.push_str(&format!(", held {h}s"));
        }
        if self.age_s != i64::MAX {
            s.push_str(&format!(", renewed {}s ago", self.age_s));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| vars.get(k).cloned()
    }

    #[test]
    fn ci_jobs_are_named_from_each_systems_documented_variables() {
        type Vars = &'static [(&'static str, &'static str)];
        let cases: &[(Vars, Option<&str>)] = &[
            (&[], None),
            (&[("CI", "false")], None),
            (&[("CI", "true")], Some("CI")),
            (
                &[
                    ("GITHUB_ACTIONS", "true"),
                    ("GITHUB_SERVER_URL", "https://github.com"),
                    ("GITHUB_REPOSITORY", "acme/gpu"),
                    ("GITHUB_RUN_ID", "42"),
                    ("GITHUB_RUN_ATTEMPT", "2"),
                    ("GITHUB_TOKEN", "ghs_secret"),
                ],
                Some("https://github.com/acme/gpu/actions/runs/42/attempts/2"),
            ),
            (&[("GITHUB_ACTIONS", "true")], Some("GitHub Actions")),
            (
                &[
                    ("GITLAB_CI", "true"),
                    ("CI_JOB_URL", "https://gitlab.example/acme/gpu/-/jobs/7"),
                    ("CI_JOB_TOKEN", "glcbt-secret"),
                ],
                Some("https://gitlab.example/acme/gpu/-/jobs/7"),
            ),
            (
                &[("GITLAB_CI", "true"), ("CI_JOB_ID", "7")],
                Some("GitLab job 7"),
            ),
            (
                &[
                    (
                        "BUILDKITE_BUILD_URL",
                        "https://buildkite.com/acme/gpu/builds/9",
                    ),
                    ("BUILDKITE_JOB_ID", "abc"),
                ],
                Some("https://buildkite.com/acme/gpu/builds/9#abc"),
            ),
            (
                &[("CIRCLE_BUILD_URL", "https://circleci.com/gh/acme/gpu/5")],
                Some("https://circleci.com/gh/acme/gpu/5"),
            ),
            (
                &[
                    ("JENKINS_URL", "https://ci.example/"),
                    ("BUILD_URL", "https://ci.example/job/gpu/3/"),
                ],
                Some("https://ci.example/job/gpu/3/"),
            ),
            (
                &[("TF_BUILD", "True"), ("BUILD_BUILDID", "11")],
                Some("Azure Pipelines build 11"),
            ),
        ];
        for (vars, want) in cases {
            assert_eq!(ci_job(env(vars)).as_deref(), *want, "{vars:?}");
        }
    }

    #[test]
    fn holder_values_are_bounded_and_free_of_control_characters() {
        let long = "x".repeat(10_000);
        let h = Holder::new(
            "apply",
            Some("alice\n\u{1b}[31m"),
            "build-7",
            12,
            0xabc,
            env(&[("CI_JOB_URL", &long), ("GITLAB_CI", "1")]),
        );
        assert_eq!(h.identity, "build-7/pid-12/00000abc");
        assert_eq!(h.user.as_deref(), Some("alice[31m"));
        assert_eq!(h.ci.as_ref().map(String::len), Some(MAX_VALUE));
        let a = h.annotations();
        assert_eq!(a[COMMAND_ANNOTATION], "apply");
        assert_eq!(a[HOST_ANNOTATION], "build-7");
    }

    #[test]
    fn a_lease_says_who_holds_it_and_whether_it_is_live() {
        let now: k8s_openapi::jiff::Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let lease: Lease = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "l", "annotations": {
                USER_ANNOTATION: "alice", HOST_ANNOTATION: "ci-7",
                COMMAND_ANNOTATION: "apply", CI_ANNOTATION: "https://ci/job/1"}},
            "spec": {"holderIdentity": "ci-7/pid-1/0", "leaseDurationSeconds": 60,
                     "acquireTime": "2026-12-01T09:59:00.000000Z",
                     "renewTime": "2026-12-01T09:59:50.000000Z"}
        }))
        .unwrap();
        let i = LeaseInfo::of(&lease, now);
        assert!(i.live());
        assert_eq!((i.age_s, i.held_s), (10, Some(60)));
        assert_eq!(
            i.describe(),
            "gpuctl apply by alice on ci-7 in https://ci/job/1, held 60s, renewed 10s ago"
        );
        let later = LeaseInfo::of(&lease, "2026-12-01T10:01:00Z".parse().unwrap());
        assert!(!later.live(), "not renewed for 70s of a 60s lease");
        let released: Lease = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 60,
            "renewTime": "2026-12-01T09:59:50.000000Z"}
        }))
        .unwrap();
        assert!(!LeaseInfo::of(&released, now).live());
    }
}
