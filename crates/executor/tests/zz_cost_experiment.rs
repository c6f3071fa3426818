#![allow(clippy::print_stderr)]
use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};
use toolsmith_executor::*;

#[test]
fn cost() {
    let executor = Executor::new(ExecutorConfig { backend: BackendChoice::Auto, max_concurrent: None }).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let limits = Limits { timeout: Duration::from_secs(10), ..Limits::recommended() };
    let profiles: Vec<(&str, Sandbox)> = vec![
        ("none", Sandbox::none()),
        ("pids", Sandbox { private_pids: true, ..Sandbox::none() }),
        ("pids+mounts", Sandbox { private_pids: true, private_mounts: true, ..Sandbox::none() }),
        ("pids+mounts+ipc", Sandbox { private_pids: true, private_mounts: true, private_ipc: true, ..Sandbox::none() }),
        ("strict-old", Sandbox { network: Network::Deny(Enforcement::IfPossible), filesystem: Filesystem::ReadOnly(Enforcement::IfPossible), private_pids: true, ..Sandbox::none() }),
        ("strict-new", Sandbox { network: Network::Deny(Enforcement::IfPossible), filesystem: Filesystem::ReadOnly(Enforcement::IfPossible), private_pids: true, private_mounts: true, private_ipc: true, protected: vec![] }),
    ];
    let n = 60;
    for round in 0..2 {
        for (name, sandbox) in &profiles {
            let mut command = Command::new(Path::new("/bin/true"), Path::new("/")).unwrap();
            command.sandbox(sandbox.clone());
            let _ = runtime.block_on(executor.run(&command, &limits)).unwrap();
            let start = Instant::now();
            for _ in 0..n {
                let o = runtime.block_on(executor.run(&command, &limits)).unwrap();
                assert!(o.success());
            }
            if round == 1 { eprintln!("{name:>18}: {:?} per call", start.elapsed() / n); }
        }
    }
    let _ = OsStr::new("");
}
