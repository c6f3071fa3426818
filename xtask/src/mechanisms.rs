//! The sandbox mechanisms `cargo xtask bench` stacks one on another, from the compat profile
//! of a tool call to the strictest, with the scratch directory some of them need.

use std::path::Path;

use toolsmith_executor::{Enforcement, Filesystem, Network, Privileges, Sandbox, Syscalls};

/// One sandbox mechanism, measured on top of every mechanism listed before it; `add` gets the
/// bench's scratch directory (the project and the masked homes live there).
pub(crate) struct Mechanism {
    pub(crate) label: &'static str,
    pub(crate) add: fn(&mut Sandbox, &Path),
}

/// The sandbox mechanisms in the order they are stacked: the first five are the compat
/// profile of a tool call, the first eight the default (least privilege, issue 23), all of
/// them the strictest. A new mechanism is one more entry (it then gets its own row and its
/// share of the cost), and the strictest profile gains it.
pub(crate) const MECHANISMS: &[Mechanism] = &[
    Mechanism {
        label: "+ PID namespace, private /proc, toolsmith's init",
        add: |sandbox, _| sandbox.private_pids = true,
    },
    Mechanism {
        label: "+ mount namespace: read-only /sys, minimal /dev, masked /proc",
        add: |sandbox, _| sandbox.private_mounts = true,
    },
    Mechanism {
        label: "+ IPC and UTS namespaces",
        add: |sandbox, _| sandbox.private_ipc = true,
    },
    Mechanism {
        label: "+ every capability dropped",
        add: |sandbox, _| sandbox.privileges = Privileges::Drop(None),
    },
    Mechanism {
        label: "+ seccomp filter (compat profile)",
        add: |sandbox, _| sandbox.syscalls = Syscalls::Filtered(Enforcement::IfPossible),
    },
    Mechanism {
        label: "+ network namespace (network none)",
        add: |sandbox, _| sandbox.network = Network::Deny(Enforcement::IfPossible),
    },
    Mechanism {
        label: "+ Landlock writes only below the project, private TMPDIR",
        add: |sandbox, scratch| {
            sandbox.filesystem = Filesystem::Project {
                root: scratch.join("project"),
                enforcement: Enforcement::IfPossible,
            }
        },
    },
    Mechanism {
        label: "+ read masks, 40 paths (default profile)",
        add: |sandbox, scratch| sandbox.hidden = masked_paths(scratch),
    },
    Mechanism {
        label: "+ Landlock read-only instead (strictest profile)",
        add: |sandbox, _| sandbox.filesystem = Filesystem::ReadOnly(Enforcement::IfPossible),
    },
];

/// The bench's masked paths: what the default masks hide in ten homes (four each), made in
/// `scratch` so that each is a real mount.
fn masked_paths(scratch: &Path) -> Vec<std::path::PathBuf> {
    (0..10)
        .flat_map(|home| {
            let home = scratch.join(format!("home{home}"));
            [".ssh", ".aws", ".netrc", ".git-credentials"].map(|name| home.join(name))
        })
        .collect()
}

/// Makes the bench's scratch directory: the project and the homes of [`masked_paths`].
pub(crate) fn make_scratch() -> anyhow::Result<std::path::PathBuf> {
    let scratch = std::env::temp_dir().join(format!("toolsmith-bench-{}", std::process::id()));
    std::fs::create_dir_all(scratch.join("project"))?;
    for path in masked_paths(&scratch) {
        let is_file = path.extension().is_none()
            && matches!(
                path.file_name().and_then(|name| name.to_str()),
                Some(".netrc" | ".git-credentials")
            );
        if is_file {
            std::fs::create_dir_all(path.parent().unwrap_or(&scratch))?;
            std::fs::write(&path, "secret\n")?;
        } else {
            std::fs::create_dir_all(&path)?;
        }
    }
    Ok(scratch)
}
