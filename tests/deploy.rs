//! The deployment files of `deploy/`: every Kubernetes manifest parses and names what toolsmith depends on (command, ports, probes, volumes, the token, the autoscaler's metric, the securityContext of docs/deploy.md), checked against the binary itself where it can be (its config parser, its argument parser, its `/metrics`).

#![expect(
    clippy::print_stderr,
    reason = "a test that cannot run without root says so"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::context::{TestContext, repository_root};
use crate::serve::PATIENCE;

fn kubernetes_dir() -> PathBuf {
    repository_root().join("deploy/kubernetes")
}

/// Every document of every `*.yaml` in deploy/kubernetes, by file name.
fn manifests() -> BTreeMap<String, Vec<Value>> {
    let mut all = BTreeMap::new();
    for entry in std::fs::read_dir(kubernetes_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|ext| ext.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let documents: Vec<Value> = serde_norway::Deserializer::from_str(&text)
            .map(|document| {
                Value::deserialize(document)
                    .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
            })
            .collect();
        assert!(!documents.is_empty(), "{} is empty", path.display());
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        all.insert(name, documents);
    }
    all
}

/// The one object of `kind` among the manifests.
fn one<'a>(manifests: &'a BTreeMap<String, Vec<Value>>, kind: &str) -> &'a Value {
    let found: Vec<&Value> = manifests
        .values()
        .flatten()
        .filter(|document| document["kind"] == kind)
        .collect();
    assert_eq!(found.len(), 1, "expected one {kind}, found {}", found.len());
    found[0]
}

fn str_of<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {value}"))
}

/// The value after `flag` in `args`.
fn flag_value<'a>(args: &'a [String], flag: &str) -> &'a str {
    let index = args
        .iter()
        .position(|arg| arg == flag)
        .unwrap_or_else(|| panic!("no {flag} in {args:?}"));
    args.get(index + 1)
        .unwrap_or_else(|| panic!("{flag} has no value in {args:?}"))
}

/// The container port a probe or Service names (by name or number).
fn resolve_port(port: &Value, container: &Value) -> u64 {
    match port {
        Value::Number(number) => number.as_u64().unwrap(),
        Value::String(name) => container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|candidate| candidate["name"] == name.as_str())
            .unwrap_or_else(|| panic!("no container port named {name}"))["containerPort"]
            .as_u64()
            .unwrap(),
        other => panic!("not a port: {other}"),
    }
}

/// The volume mount whose path contains `path`, and its volume.
fn mount_of<'a>(path: &str, container: &'a Value, pod: &'a Value) -> (&'a Value, &'a Value) {
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|mount| {
            let mount_path = str_of(&mount["mountPath"], "mountPath");
            Path::new(path).starts_with(mount_path)
        })
        .max_by_key(|mount| str_of(&mount["mountPath"], "mountPath").len())
        .unwrap_or_else(|| panic!("no volume is mounted at {path}"));
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|volume| volume["name"] == mount["name"])
        .unwrap_or_else(|| panic!("no volume {}", mount["name"]));
    (mount, volume)
}

/// The manifests parse, are all listed by the kustomization, and name one namespace.
#[test]
fn kubernetes_manifests_parse_and_are_all_applied() {
    let manifests = manifests();
    let kustomization = &manifests["kustomization.yaml"][0];
    let listed: Vec<&str> = kustomization["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|resource| str_of(resource, "resource"))
        .collect();
    let mut files: Vec<&str> = manifests
        .keys()
        .map(String::as_str)
        .filter(|name| *name != "kustomization.yaml")
        .collect();
    files.sort_unstable();
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, files, "the kustomization lists other files");
    let namespace = str_of(&kustomization["namespace"], "namespace");
    for (file, documents) in &manifests {
        for document in documents {
            if file == "kustomization.yaml" {
                continue;
            }
            assert!(document["apiVersion"].is_string(), "{file}: no apiVersion");
            assert!(document["metadata"]["name"].is_string(), "{file}: no name");
            if document["kind"] != "Namespace" {
                assert_eq!(document["metadata"]["namespace"], namespace, "{file}");
            } else {
                assert_eq!(document["metadata"]["name"], namespace, "{file}");
                assert_eq!(
                    document["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
                    "privileged",
                    "the namespace must admit the privileged container"
                );
            }
        }
    }
}

/// The Deployment runs `serve --http 0.0.0.0:PORT` with a token file from the Secret, on the
/// port the probes (`/healthz`, `/readyz`) and the Service use; the tools directory it
/// serves is the ConfigMap's `[generator] tools_dir`, on the ReadWriteMany claim; the
/// securityContext is what docs/deploy.md says the sandbox needs.
#[test]
fn kubernetes_deployment_names_what_toolsmith_depends_on() {
    let manifests = manifests();
    let deployment = one(&manifests, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in deployment["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&labels[key], value, "the selector misses the pods");
    }
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    let command: Vec<String> = container["command"]
        .as_array()
        .unwrap()
        .iter()
        .chain(container["args"].as_array().unwrap())
        .map(|arg| str_of(arg, "argument").to_owned())
        .collect();
    assert_eq!(command[0], "toolsmith");
    let serve = command.iter().position(|arg| arg == "serve").unwrap();
    let address = flag_value(&command, "--http");
    let port: u64 = address
        .strip_prefix("0.0.0.0:")
        .unwrap_or_else(|| panic!("--http {address} is not every interface"))
        .parse()
        .unwrap();

    // Ports: the container's, the probes', the Service's.
    let mcp_port = resolve_port(&Value::String("mcp".to_owned()), container);
    assert_eq!(mcp_port, port, "--http and containerPort disagree");
    for (probe, path) in [
        ("startupProbe", "/readyz"),
        ("readinessProbe", "/readyz"),
        ("livenessProbe", "/healthz"),
    ] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(resolve_port(&get["port"], container), port, "{probe}");
    }
    let service = one(&manifests, "Service");
    for (key, value) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[key], value, "the Service selects no pod");
    }
    let service_ports = service["spec"]["ports"].as_array().unwrap();
    assert!(
        service_ports
            .iter()
            .all(|service_port| resolve_port(&service_port["targetPort"], container) == port),
        "the Service targets another port"
    );
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"],
        port.to_string()
    );

    // The token: a file of the Secret.
    let token_file = flag_value(&command[serve..], "--token-file");
    let (mount, volume) = mount_of(token_file, container, pod);
    let secret = one(&manifests, "Secret");
    assert_eq!(volume["secret"]["secretName"], secret["metadata"]["name"]);
    let key = Path::new(token_file)
        .strip_prefix(str_of(&mount["mountPath"], "mountPath"))
        .unwrap()
        .to_str()
        .unwrap();
    assert!(
        secret["stringData"][key].is_string() || secret["data"][key].is_string(),
        "the Secret has no key {key}"
    );

    // The config file: the ConfigMap's config.toml, whose tools_dir is the directory served,
    // on the ReadWriteMany claim.
    let config_file = flag_value(&command[..serve], "--config");
    let (mount, volume) = mount_of(config_file, container, pod);
    let config_map = one(&manifests, "ConfigMap");
    assert_eq!(volume["configMap"]["name"], config_map["metadata"]["name"]);
    let key = Path::new(config_file)
        .strip_prefix(str_of(&mount["mountPath"], "mountPath"))
        .unwrap()
        .to_str()
        .unwrap();
    let config: toml::Table =
        toml::from_str(str_of(&config_map["data"][key], "config.toml")).unwrap();
    let tools_dir = flag_value(&command[..serve], "--tools-dir");
    assert_eq!(
        config["generator"]["tools_dir"].as_str(),
        Some(tools_dir),
        "generated tools would go elsewhere than the directory served"
    );
    let (mount, volume) = mount_of(tools_dir, container, pod);
    assert_ne!(
        mount["readOnly"], true,
        "the tools directory must be writable"
    );
    let claim = one(&manifests, "PersistentVolumeClaim");
    assert_eq!(
        volume["persistentVolumeClaim"]["claimName"],
        claim["metadata"]["name"]
    );
    assert!(
        claim["spec"]["accessModes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|mode| mode == "ReadWriteMany"),
        "replicas on several nodes need ReadWriteMany"
    );
    // Another node's writes on a network filesystem raise no inotify event.
    flag_value(&command[serve..], "--poll-interval");

    // SIGTERM's grace fits in the pod's.
    let grace = flag_value(&command[serve..], "--shutdown-grace");
    let grace: u64 = grace.strip_suffix('s').unwrap().parse().unwrap();
    assert!(pod["terminationGracePeriodSeconds"].as_u64().unwrap() > grace);

    // docs/deploy.md, "What the cluster must allow".
    let security = &container["securityContext"];
    assert_eq!(security["privileged"], true);
    assert_eq!(security["runAsUser"], 0);
    assert_eq!(security["allowPrivilegeEscalation"], true);
    assert_eq!(security["seccompProfile"]["type"], "Unconfined");
    assert_eq!(security["appArmorProfile"]["type"], "Unconfined");
    let added: Vec<&str> = security["capabilities"]["add"]
        .as_array()
        .unwrap()
        .iter()
        .map(|capability| str_of(capability, "capability"))
        .collect();
    for needed in CAPABILITIES {
        assert!(added.contains(&needed), "{needed} is not added: {added:?}");
    }
    let deploy_doc = std::fs::read_to_string(repository_root().join("docs/deploy.md")).unwrap();
    for named in [
        "privileged: true",
        "runAsUser: 0",
        "Unconfined",
        "SYS_ADMIN",
        "SETPCAP",
        "ReadWriteMany",
        "--poll-interval",
        "toolsmith_calls_in_flight",
    ] {
        assert!(
            deploy_doc.contains(named),
            "docs/deploy.md does not say {named}"
        );
    }
}

/// The capabilities docs/deploy.md says toolsmith needs, which the Deployment adds.
const CAPABILITIES: [&str; 6] = [
    "SYS_ADMIN",
    "SETPCAP",
    "SETUID",
    "SETGID",
    "KILL",
    "DAC_OVERRIDE",
];

/// Each mechanism `toolsmith doctor` reports, with its status (`ok`, `warn`, `no`), and the
/// backend line.
fn doctor_mechanisms(command: &mut std::process::Command) -> Vec<String> {
    let output = command.arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .filter_map(|line| {
            if line.starts_with("backend:") {
                return Some(line.split(" (").next().unwrap_or(line).to_owned());
            }
            let trimmed = line.trim_start();
            let columns: Vec<&str> = trimmed
                .split("  ")
                .filter(|column| !column.is_empty())
                .collect();
            match columns.as_slice() {
                [name, status, ..]
                    if line.starts_with("  ") && ["ok", "warn", "no"].contains(&status.trim()) =>
                {
                    Some(format!("{} {}", name.trim(), status.trim()))
                }
                _ => None,
            }
        })
        .collect()
}

/// A root toolsmith holding only the capabilities the Deployment adds gets the same sandbox
/// as one holding every capability: the same backend and every mechanism `doctor` reports
/// in the same state.
#[test]
fn kubernetes_capabilities_are_enough_for_the_whole_sandbox() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        let message = "WARNING: the capability check needs root; SKIPPED";
        assert!(
            std::env::var_os("TOOLSMITH_REQUIRE_BACKENDS").is_none(),
            "{message}"
        );
        eprintln!("{message}");
        return;
    }
    let context = TestContext::new();
    let everything = doctor_mechanisms(&mut context.command());
    assert!(
        everything.iter().any(|line| line.starts_with("backend:"))
            && everything.iter().any(|line| line.ends_with(" ok")),
        "doctor's output changed shape: {everything:?}"
    );
    let bounding = std::iter::once("-all".to_owned())
        .chain(
            CAPABILITIES
                .iter()
                .map(|name| format!("+{}", name.to_lowercase())),
        )
        .collect::<Vec<_>>()
        .join(",");
    // The binary under test, with its scrubbed environment, under `setpriv`.
    let plain = context.command();
    #[expect(
        clippy::disallowed_methods,
        reason = "setpriv runs the binary under test with fewer capabilities"
    )]
    let mut setpriv = std::process::Command::new("setpriv");
    setpriv
        .args(["--bounding-set", &bounding])
        .arg(plain.get_program())
        .env_clear()
        .envs(
            plain
                .get_envs()
                .filter_map(|(key, value)| Some((key, value?))),
        )
        .current_dir(plain.get_current_dir().unwrap());
    let with_the_deployments = doctor_mechanisms(&mut setpriv);
    assert_eq!(
        with_the_deployments, everything,
        "with only {CAPABILITIES:?} the sandbox is weaker"
    );
}

/// The status and body of `GET path` with the bearer `token`.
async fn get(authority: &str, path: &str, token: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(authority).await.ok()?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut response))
        .await
        .ok()?
        .ok()?;
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// The Deployment's own command line and ConfigMap start a real server (its paths moved into
/// a temporary directory, its address to loopback), and that server exports the metric the
/// HorizontalPodAutoscaler scales on; the autoscaler targets the Deployment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_command_starts_a_server_exporting_the_autoscalers_metric() {
    let manifests = manifests();
    let deployment = one(&manifests, "Deployment");
    let hpa = one(&manifests, "HorizontalPodAutoscaler");
    let target = &hpa["spec"]["scaleTargetRef"];
    assert_eq!(target["kind"], "Deployment");
    assert_eq!(target["name"], deployment["metadata"]["name"]);
    let metrics = hpa["spec"]["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), 1);
    assert_eq!(metrics[0]["type"], "Pods");
    let metric = str_of(&metrics[0]["pods"]["metric"]["name"], "metric");

    let context = TestContext::new();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let config_map = one(&manifests, "ConfigMap");
    let token = "0123456789abcdef0123456789abcdef";
    // Each mounted directory becomes one under the test's root, filled as the pod's would be.
    let moved = |path: &str| context.root.join(path.trim_start_matches('/'));
    for mount in container["volumeMounts"].as_array().unwrap() {
        std::fs::create_dir_all(moved(str_of(&mount["mountPath"], "mountPath"))).unwrap();
    }
    let mut args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|arg| str_of(arg, "argument").to_owned())
        .collect();
    let config_text = str_of(&config_map["data"]["config.toml"], "config.toml")
        .replace("/var/lib/", &format!("{}/var/lib/", context.root.display()));
    std::fs::write(moved(flag_value(&args, "--config")), config_text).unwrap();
    std::fs::write(
        moved(flag_value(&args, "--token-file")),
        format!("{token}\n"),
    )
    .unwrap();
    for arg in &mut args {
        if arg.starts_with('/') {
            *arg = moved(arg).display().to_string();
        } else if arg.starts_with("0.0.0.0:") {
            "127.0.0.1:0".clone_into(arg);
        }
    }
    let mut command = context.command();
    for variable in container["env"].as_array().unwrap() {
        let value = str_of(&variable["value"], "env value");
        command.env(str_of(&variable["name"], "env name"), moved(value));
    }
    let mut child = command
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            let _ignored = sender.send(line);
        }
    });
    let deadline = Instant::now() + PATIENCE;
    let mut log = String::new();
    let authority = loop {
        match receiver.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                log.push_str(&line);
                log.push('\n');
                if let Some(rest) = line.strip_prefix("toolsmith: serving MCP on http://") {
                    break rest.split('/').next().unwrap().to_owned();
                }
            }
            Err(_) if Instant::now() < deadline && child.try_wait().unwrap().is_none() => {}
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the Deployment's command did not start a server: {args:?}\n{log}");
            }
        }
    };
    let mut scraped = None;
    while Instant::now() < deadline {
        if let Some((200, body)) = get(&authority, "/metrics", token).await {
            scraped = Some(body);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let scraped = scraped.unwrap_or_else(|| panic!("no /metrics: {log}"));
    assert!(
        scraped
            .lines()
            .any(|line| line.split([' ', '{']).next() == Some(metric)),
        "the server exports no {metric}:\n{scraped}"
    );
}
