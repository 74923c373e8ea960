//! Admission webhooks that are not ready yet. Right after an install (Kueue bootstrapping its
//! certificates, an operator whose pods are still starting) the API server refuses every write the
//! webhook covers with `failed calling webhook "NAME": ...`. Instead of retrying each object blind,
//! the first write that meets such a webhook waits for it once, bounded and named in the progress
//! output: for its Service to have a ready endpoint (EndpointSlices, as the API server resolves
//! it), then for a dry-run of that write to pass the webhook. Every other write held up by the same
//! webhook waits for that one wait and retries once; a webhook that stays unreachable fails them
//! all with what to check.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use tokio::time::Instant;

use crate::report::{Reporter, Silent};
use crate::wait::{Look, TimedOut, Wait};

/// The API server's words for a webhook it could not call (`ErrCallingWebhook` in
/// k8s.io/apiserver `pkg/util/webhook/error.go`, wrapped as an internal error with
/// "failed to call webhook" by the admission dispatchers).
const CALL_FAILED: &str = "failed calling webhook \"";
const CALL_REASON: &str = "failed to call webhook";

/// The label EndpointSlices carry for their Service (`discovery.k8s.io/v1`).
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// How long a webhook is waited for unless the command says otherwise (`apply --webhook-timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// How often a waiting run looks again.
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// The webhook named in an error the API server returned because it could not call that webhook
/// (not because the webhook refused the object), else `None`.
pub fn unreachable_webhook(e: &kube::Error) -> Option<String> {
    let kube::Error::Api(s) = e else {
        return None;
    };
    if s.code != 500 || !s.message.contains(CALL_REASON) {
        return None;
    }
    let rest = &s.message[s.message.find(CALL_FAILED)? + CALL_FAILED.len()..];
    let name = &rest[..rest.find('"')?];
    (!name.is_empty()).then(|| name.to_string())
}

/// What a wait for one webhook found.
#[derive(Debug, Clone)]
enum Outcome {
    /// It answers.
    Ready,
    /// It did not answer within the bound: why, for every write it holds up.
    Unreachable(String),
}

/// Settings and state of the webhook waits of one connection.
pub struct Waits {
    settings: RwLock<Settings>,
    done: tokio::sync::Mutex<BTreeMap<String, Outcome>>,
}

#[derive(Clone)]
struct Settings {
    timeout: Duration,
    poll: Duration,
    reporter: Arc<dyn Reporter + Send + Sync>,
}

impl Default for Waits {
    fn default() -> Self {
        Waits {
            settings: RwLock::new(Settings {
                timeout: DEFAULT_TIMEOUT,
                poll: DEFAULT_POLL,
                reporter: Arc::new(Silent),
            }),
            done: tokio::sync::Mutex::new(BTreeMap::new()),
        }
    }
}

/// Where a webhook's calls go.
enum Target {
    /// A Service (namespace, name).
    Service(String, String),
    /// A URL, or a webhook not found in any configuration: only a probe tells.
    Other,
}

impl Waits {
    /// Bounds the waits by `timeout`, polling every `poll`, and reports them to `reporter`.
    pub fn configure(
        &self,
        timeout: Duration,
        poll: Duration,
        reporter: Arc<dyn Reporter + Send + Sync>,
    ) {
        let mut s = self
            .settings
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *s = Settings {
            timeout,
            poll,
            reporter,
        };
    }

    fn settings(&self) -> Settings {
        self.settings
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Waits (once per webhook per connection) until `webhook` answers: its Service has a ready
    /// endpoint and `probe` (a dry-run of the write it held up) no longer fails to call it. Writes
    /// that meet the same webhook meanwhile wait here for the same answer. `Err` says why it is
    /// still unreachable.
    pub async fn wait<F, Fut>(
        &self,
        client: &kube::Client,
        webhook: &str,
        probe: F,
    ) -> Result<(), String>
    where
        F: Fn() -> Fut + Sync,
        Fut: std::future::Future<Output = Result<(), kube::Error>> + Send,
    {
        let mut done = self.done.lock().await;
        if let Some(o) = done.get(webhook) {
            return match o {
                Outcome::Ready => Ok(()),
                Outcome::Unreachable(why) => Err(why.clone()),
            };
        }
        let s = self.settings();
        let outcome = wait_for(client, webhook, &s, probe).await;
        done.insert(webhook.to_string(), outcome.clone());
        match outcome {
            Outcome::Ready => {
                s.reporter.note(&format!(
                    "admission webhook `{webhook}` answers; continuing"
                ));
                Ok(())
            }
            Outcome::Unreachable(why) => Err(why),
        }
    }
}

async fn wait_for<F, Fut>(client: &kube::Client, webhook: &str, s: &Settings, probe: F) -> Outcome
where
    F: Fn() -> Fut + Sync,
    Fut: std::future::Future<Output = Result<(), kube::Error>> + Send,
{
    let started = Instant::now();
    let target = target_of(client, webhook).await;
    let (what, service) = match &target {
        Target::Service(ns, name) => (
            format!("admission webhook `{webhook}` (Service {ns}/{name}) to have a ready endpoint"),
            Some(format!("Service {ns}/{name}")),
        ),
        Target::Other => (format!("admission webhook `{webhook}` to answer"), None),
    };
    let (target, probe) = (&target, &probe);
    // Each pending look says why the webhook does not answer yet.
    let Ok(answered) = Wait::new(s.timeout, s.poll)
        .since(started)
        .until(
            &mut (),
            |_, _| {
                Box::pin(async move {
                    if let Target::Service(ns, name) = target {
                        match ready_endpoints(client, ns, name).await {
                            Ok(0) => return Ok(Look::Pending("no ready endpoints".to_string())),
                            Ok(_) => {}
                            Err(e) => {
                                return Ok(Look::Pending(format!(
                                    "cannot read its EndpointSlices: {e}"
                                )));
                            }
                        }
                    }
                    match probe().await {
                        Ok(()) => Ok(Look::Done(())),
                        Err(e) if unreachable_webhook(&e).as_deref() == Some(webhook) => {
                            Ok(Look::Pending(match &e {
                                kube::Error::Api(st) => st.message.clone(),
                                other => other.to_string(),
                            }))
                        }
                        // Anything else (the object's own error, a dry-run the webhook does not
                        // support) came past the webhook call: it answers; the write itself will
                        // say the rest.
                        Err(_) => Ok::<_, std::convert::Infallible>(Look::Done(())),
                    }
                })
            },
            |_, elapsed| {
                s.reporter
                    .waiting(&what, elapsed.as_secs(), s.timeout.as_secs());
            },
        )
        .await;
    match answered {
        Ok(()) => Outcome::Ready,
        Err(TimedOut(last)) => {
            let check = service.map_or_else(
                || "check the webhook's server".to_string(),
                |svc| format!("check the pods behind {svc}"),
            );
            Outcome::Unreachable(format!(
                "admission webhook `{webhook}` did not answer within {}s ({last}); {check}, then re-run",
                s.timeout.as_secs()
            ))
        }
    }
}

/// Where `webhook`'s calls go, from the validating and mutating webhook configurations.
async fn target_of(client: &kube::Client, webhook: &str) -> Target {
    let lp = ListParams::default();
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    if let Ok(list) = validating.list(&lp).await {
        for c in list.items {
            for w in c.webhooks.unwrap_or_default() {
                if w.name == webhook {
                    return service_of(
                        w.client_config
                            .service
                            .as_ref()
                            .map(|s| (&s.namespace, &s.name)),
                    );
                }
            }
        }
    }
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    if let Ok(list) = mutating.list(&lp).await {
        for c in list.items {
            for w in c.webhooks.unwrap_or_default() {
                if w.name == webhook {
                    return service_of(
                        w.client_config
                            .service
                            .as_ref()
                            .map(|s| (&s.namespace, &s.name)),
                    );
                }
            }
        }
    }
    Target::Other
}

fn service_of(svc: Option<(&String, &String)>) -> Target {
    match svc {
        Some((ns, name)) => Target::Service(ns.clone(), name.clone()),
        None => Target::Other,
    }
}

/// Ready endpoints of Service `namespace/name`, counted as the API server picks them: an endpoint
/// is ready unless its `ready` condition says false.
async fn ready_endpoints(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<usize, kube::Error> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().labels(&format!("{SERVICE_NAME_LABEL}={name}"));
    let slices = api.list(&lp).await?;
    Ok(slices
        .items
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .filter(|e| !e.addresses.is_empty())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .count())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, "InternalError")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn only_call_failures_name_an_unreachable_webhook() {
        let refused = r#"Internal error occurred: failed calling webhook "vclusterqueue.kb.io": failed to call webhook: Post "https://kueue-webhook-service.kueue-system.svc:443/validate?timeout=10s": no endpoints available for service "kueue-webhook-service""#;
        assert_eq!(
            unreachable_webhook(&api_error(500, refused)).as_deref(),
            Some("vclusterqueue.kb.io")
        );
        // The webhook answered and denied the object: its own error, no wait.
        let denied =
            r#"admission webhook "vclusterqueue.kb.io" denied the request: spec.cohort: invalid"#;
        assert_eq!(unreachable_webhook(&api_error(400, denied)), None);
        // An invalid answer is not unreachability either.
        let invalid = r#"Internal error occurred: failed calling webhook "x.example": received invalid webhook response: bad"#;
        assert_eq!(unreachable_webhook(&api_error(500, invalid)), None);
        assert_eq!(
            unreachable_webhook(&api_error(500, "etcdserver: leader changed")),
            None
        );
        assert_eq!(
            unreachable_webhook(&api_error(
                500,
                r#"failed calling webhook "": failed to call webhook: x"#
            )),
            None
        );
    }
}
