//! What the egress and Unix-grant tests build their runs from: a sandbox whose only way out
//! is the run's egress grant, and a command of a program under it.

use std::ffi::OsStr;
use std::path::Path;

use toolsmith_executor::{Command, Egress, Enforcement, Network, Sandbox, Syscalls};

/// The sandbox of a run granted `entries` (hosts, addresses, `unix:` paths), the filter on.
pub(crate) fn proxied(entries: &[&str]) -> Sandbox {
    Sandbox {
        network: Network::Proxy(Egress::from_entries(entries.iter().copied()).unwrap()),
        syscalls: Syscalls::Filtered(Enforcement::Required),
        ..Sandbox::none()
    }
}

/// `program args` in `/` under `sandbox`, with a plain `PATH`.
pub(crate) fn command(program: &Path, args: &[&str], sandbox: Sandbox) -> Command {
    let mut command = Command::new(program, Path::new("/")).unwrap();
    for arg in args {
        command.arg(OsStr::new(arg));
    }
    command.env(OsStr::new("PATH"), OsStr::new("/usr/bin:/bin"));
    command.sandbox(sandbox);
    command
}
