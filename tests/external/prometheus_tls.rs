//! gpuctl's Prometheus client against the real Prometheus serving HTTPS with a private CA and basic
//! authentication (its `--web.config.file`), as a monitoring stack behind TLS does: the client is
//! built on hyper-util and hyper-rustls (issue 27 removed reqwest), so these pin down what it must
//! keep doing: trust the CA file besides the system roots, send the URL's user info as basic
//! authentication, refuse an unknown issuer, and never print a credential.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpuctl_cluster::prometheus::{Prometheus, PrometheusConfig, PrometheusError, Token};
use gpuctl_test_skip::needs_prometheus;

const PASSWORD: &str = "s3cret-pw";

struct TlsPrometheus {
    port: u16,
    ca: std::path::PathBuf,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for TlsPrometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(dir: &Path, program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, a server certificate for 127.0.0.1 signed by it, a bcrypt hash of [`PASSWORD`], and
/// Prometheus serving its API with both on a free port.
fn start() -> TlsPrometheus {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    run(
        d,
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=gpuctl-test-ca",
        ],
    );
    run(
        d,
        "openssl",
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(d.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    run(
        d,
        "openssl",
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ],
    );
    let hash = Command::new("python3")
        .args([
            "-W",
            "ignore",
            "-c",
            &format!(
                "import crypt; print(crypt.crypt('{PASSWORD}', crypt.mksalt(crypt.METHOD_BLOWFISH)))"
            ),
        ])
        .output()
        .expect("python3 runs");
    let hash = String::from_utf8(hash.stdout).unwrap().trim().to_owned();
    assert!(hash.starts_with("$2"), "bcrypt hash: {hash}");
    std::fs::write(
        d.join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  gpuctl: '{hash}'\n",
            d.join("server.pem").display(),
            d.join("server.key").display()
        ),
    )
    .unwrap();
    std::fs::write(d.join("prometheus.yml"), "global: {scrape_interval: 1s}\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = std::fs::File::create(d.join("prometheus.log")).unwrap();
    let child = Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            d.join("prometheus.yml").display()
        ))
        .arg(format!("--web.config.file={}", d.join("web.yml").display()))
        .arg(format!("--storage.tsdb.path={}", d.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("prometheus runs (apt-get install prometheus; docs/testing.md)");
    TlsPrometheus {
        port,
        ca: d.join("ca.pem"),
        child,
        _dir: dir,
    }
}

fn config(url: &str, ca: Option<&Path>) -> PrometheusConfig {
    let mut cfg = PrometheusConfig::new(url);
    cfg.ca_file = ca.map(Path::to_path_buf);
    cfg.timeout = Duration::from_secs(5);
    cfg
}

async fn value(cfg: &PrometheusConfig, promql: &str) -> Result<f64, PrometheusError> {
    let samples = Prometheus::new(cfg)?.query(promql, now()).await?;
    Ok(samples[0].value)
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[needs_prometheus]
#[tokio::test]
async fn https_with_a_private_ca_and_basic_auth_from_the_url() {
    let prom = start();
    let with_auth = format!("https://gpuctl:{PASSWORD}@127.0.0.1:{}", prom.port);
    let trusted = config(&with_auth, Some(&prom.ca));

    // Prometheus starts in about a second: poll through the client itself.
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        match value(&trusted, "vector(42)").await {
            Ok(v) => break v,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("no answer from the TLS Prometheus: {e}"),
        }
    };
    assert_eq!(answer, 42.0);

    // The system roots alone do not know the private CA: refused, saying why, naming the URL
    // without the password.
    let e = value(&config(&with_auth, None), "vector(1)")
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, PrometheusError::Unreachable { .. }), "{text}");
    assert!(text.to_lowercase().contains("certificate"), "{text}");
    assert!(
        text.contains(&format!("https://***@127.0.0.1:{}", prom.port)),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");

    // Trusted, but no credentials: Prometheus's own 401, with the hint, and no secret anywhere.
    let anonymous = config(&format!("https://127.0.0.1:{}", prom.port), Some(&prom.ca));
    match value(&anonymous, "vector(1)").await.unwrap_err() {
        PrometheusError::Status { status, hint, .. } => {
            assert_eq!(status, 401);
            assert!(hint.contains("token"), "{hint}");
        }
        other => panic!("expected HTTP 401, got {other}"),
    }

    // A wrong bearer token replaces the URL's user info and is refused; it is never printed.
    let mut bearer = config(&with_auth, Some(&prom.ca));
    bearer.token = Some(Token::new("not-the-token-42"));
    let e = value(&bearer, "vector(1)").await.unwrap_err();
    let text = format!("{e} {e:?} {bearer:?}");
    assert!(
        matches!(e, PrometheusError::Status { status: 401, .. }),
        "{text}"
    );
    assert!(!text.contains("not-the-token-42"), "{text}");
    assert!(!text.contains(PASSWORD), "{text}");
}
