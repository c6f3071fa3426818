//! `cargo xtask man` and `cargo xtask install`: man pages, completions and an installed tree, generated from the CLI's own clap definition.
//!
//! An install under `PREFIX` is laid out so that the binary finds its system
//! tools without any flag (`toolsmith_registry`'s system layer is
//! `<prefix>/libexec/toolsmith` for the binary `<prefix>/bin/toolsmith`):
//!
//! ```text
//! PREFIX/bin/toolsmith
//! PREFIX/libexec/toolsmith/          the bundled system tools (every file of system-tools/)
//! PREFIX/share/man/man1/toolsmith.1  and toolsmith-SUBCOMMAND.1
//! PREFIX/share/bash-completion/completions/toolsmith
//! PREFIX/share/zsh/site-functions/_toolsmith
//! PREFIX/share/fish/vendor_completions.d/toolsmith.fish
//! ```

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap_complete::Shell;

/// The directory of the bundled system tools in the repository.
pub(crate) const SYSTEM_TOOLS: &str = "system-tools";

/// Writes `toolsmith.1` and one page per subcommand into `out`; returns the files written.
pub(crate) fn man(out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let command = toolsmith_cli::command();
    clap_mangen::generate_to(command, out)
        .with_context(|| format!("cannot write man pages into {}", out.display()))?;
    let mut pages: Vec<PathBuf> = fs::read_dir(out)
        .with_context(|| format!("cannot read {}", out.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("toolsmith") && name.ends_with(".1"))
        })
        .collect();
    pages.sort();
    Ok(pages)
}

/// The default directory of `cargo xtask man`: `<target dir>/man`.
pub(crate) fn default_man_dir(root: &Path) -> PathBuf {
    target_dir(root).join("man")
}

/// `$CARGO_TARGET_DIR`, else `<root>/target`.
fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root.join(dir),
        _ => root.join("target"),
    }
}

/// Builds toolsmith (release, or the dev profile with `debug`) and installs it under `prefix`.
pub(crate) fn install(root: &Path, prefix: &Path, debug: bool) -> anyhow::Result<()> {
    let prefix = std::path::absolute(prefix)
        .with_context(|| format!("cannot resolve {}", prefix.display()))?;
    let cargo = crate::cargo::program();
    let mut args = vec!["build", "--package", "toolsmith", "--bin", "toolsmith"];
    if !debug {
        args.push("--release");
    }
    eprintln!("install: cargo {}", args.join(" "));
    let status = crate::cargo::command()
        .args(&args)
        .current_dir(root)
        .status()
        .with_context(|| format!("could not start `{}`", cargo.to_string_lossy()))?;
    if !status.success() {
        bail!("`cargo {}` exited with {status}", args.join(" "));
    }
    let binary = target_dir(root)
        .join(if debug { "debug" } else { "release" })
        .join("toolsmith");

    let bin = prefix.join("bin");
    create(&bin)?;
    copy_file(&binary, &bin.join("toolsmith"))?;
    eprintln!("install: {}", bin.join("toolsmith").display());

    let libexec = prefix.join("libexec").join("toolsmith");
    let tools = install_system_tools(&root.join(SYSTEM_TOOLS), &libexec)?;
    eprintln!("install: {} ({tools} system tools)", libexec.display());

    let man_dir = prefix.join("share").join("man").join("man1");
    let pages = man(&man_dir)?;
    eprintln!("install: {} ({} man pages)", man_dir.display(), pages.len());

    for (shell, relative) in COMPLETIONS {
        let path = prefix.join(relative);
        if let Some(parent) = path.parent() {
            create(parent)?;
        }
        let mut script = Vec::new();
        clap_complete::generate(
            *shell,
            &mut toolsmith_cli::command(),
            "toolsmith",
            &mut script,
        );
        fs::write(&path, script).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("install: {}", path.display());
    }
    eprintln!(
        "install: done; put {} on PATH and run `toolsmith doctor`",
        bin.display()
    );
    Ok(())
}

/// Where each shell looks for completions below a prefix.
const COMPLETIONS: &[(Shell, &str)] = &[
    (Shell::Bash, "share/bash-completion/completions/toolsmith"),
    (Shell::Zsh, "share/zsh/site-functions/_toolsmith"),
    (
        Shell::Fish,
        "share/fish/vendor_completions.d/toolsmith.fish",
    ),
];

/// Copies every file of `from` into `to`, keeping the modes;
/// a file of `to` that is no longer bundled is removed, so a reinstall leaves
/// no stale tool behind. Returns the number of tools.
fn install_system_tools(from: &Path, to: &Path) -> anyhow::Result<usize> {
    create(to)?;
    let mut bundled = Vec::new();
    for entry in fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))? {
        let entry = entry.with_context(|| format!("cannot read {}", from.display()))?;
        let name = entry.file_name();
        if !entry.path().is_file() {
            continue;
        }
        copy_file(&entry.path(), &to.join(&name))?;
        bundled.push(name);
    }
    for entry in fs::read_dir(to).with_context(|| format!("cannot read {}", to.display()))? {
        let entry = entry.with_context(|| format!("cannot read {}", to.display()))?;
        if !bundled.contains(&entry.file_name()) && entry.path().is_file() {
            fs::remove_file(entry.path())
                .with_context(|| format!("cannot remove {}", entry.path().display()))?;
        }
    }
    Ok(bundled.len())
}

fn create(dir: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

/// Copies through a temporary file and a rename, so that replacing a running
/// binary works and a reader never sees half a file.
fn copy_file(from: &Path, to: &Path) -> anyhow::Result<()> {
    let temporary = to.with_extension("installing");
    fs::copy(from, &temporary)
        .with_context(|| format!("cannot copy {} to {}", from.display(), temporary.display()))?;
    let mode = fs::metadata(from)
        .with_context(|| format!("cannot read {}", from.display()))?
        .permissions()
        .mode();
    fs::set_permissions(&temporary, fs::Permissions::from_mode(mode & 0o755 | 0o644))
        .with_context(|| format!("cannot set the mode of {}", temporary.display()))?;
    fs::rename(&temporary, to)
        .with_context(|| format!("cannot move {} to {}", temporary.display(), to.display()))
}
