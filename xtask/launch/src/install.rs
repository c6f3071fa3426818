//! `cargo xtask install` and `cargo xtask man`: one build of the `toolsmith` binary, then an installed tree whose man pages and completions that binary wrote.
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
use std::process::Command;

use crate::Failure;

/// The directory of the bundled system tools in the repository.
const SYSTEM_TOOLS: &str = "system-tools";

/// What the first build costs, said before it starts (measured: README, "Set-up").
const FIRST_BUILD: &str = "a first build compiles some 240 crates, each once: \
                           28 minutes on a busy 2-core machine, less on a quiet one; \
                           later builds only what changed";

/// Where each shell looks for completions below a prefix, by the name `toolsmith completions` takes.
const COMPLETIONS: &[(&str, &str)] = &[
    ("bash", "share/bash-completion/completions/toolsmith"),
    ("zsh", "share/zsh/site-functions/_toolsmith"),
    ("fish", "share/fish/vendor_completions.d/toolsmith.fish"),
];

/// `install --prefix DIR [--debug]`: the prefix and whether to build the dev profile.
pub(crate) fn parse_install(args: &[String]) -> Result<(PathBuf, bool), Failure> {
    let mut prefix = None;
    let mut debug = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.split_once('=') {
            Some(("--prefix", value)) => prefix = Some(directory("--prefix", Some(value))?),
            None if arg == "--prefix" => {
                prefix = Some(directory("--prefix", args.next().map(String::as_str))?);
            }
            None if arg == "--debug" => debug = true,
            _ => return Err(Failure(format!("unknown option `{arg}` for `install`"))),
        }
    }
    let prefix = prefix.ok_or_else(|| {
        Failure("`install` needs `--prefix DIR` (e.g. --prefix ~/.local)".to_owned())
    })?;
    Ok((prefix, debug))
}

/// `man [--out DIR]`: the directory, if given.
pub(crate) fn parse_man(args: &[String]) -> Result<Option<PathBuf>, Failure> {
    let mut out = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.split_once('=') {
            Some(("--out", value)) => out = Some(directory("--out", Some(value))?),
            None if arg == "--out" => {
                out = Some(directory("--out", args.next().map(String::as_str))?);
            }
            _ => return Err(Failure(format!("unknown option `{arg}` for `man`"))),
        }
    }
    Ok(out)
}

fn directory(flag: &str, value: Option<&str>) -> Result<PathBuf, Failure> {
    value
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| Failure(format!("`{flag}` needs a directory")))
}

/// `$CARGO_TARGET_DIR`, else `<root>/target`.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root.join(dir),
        _ => root.join("target"),
    }
}

/// Builds toolsmith (release, or the dev profile with `debug`) and installs it under `prefix`.
pub(crate) fn install(root: &Path, prefix: &Path, debug: bool) -> Result<(), Failure> {
    let prefix = std::path::absolute(prefix)
        .map_err(|error| Failure(format!("cannot resolve {}: {error}", prefix.display())))?;
    eprintln!(
        "install: building the toolsmith binary ({} profile), then installing it into {}",
        if debug { "dev" } else { "release" },
        prefix.display()
    );
    if !debug {
        eprintln!("install: {FIRST_BUILD}");
    }
    let binary = build(root, debug)?;

    let bin = prefix.join("bin");
    create(&bin)?;
    let installed = bin.join("toolsmith");
    copy_file(&binary, &installed)?;
    eprintln!("install: {}", installed.display());

    let libexec = prefix.join("libexec").join("toolsmith");
    let tools = install_system_tools(&root.join(SYSTEM_TOOLS), &libexec)?;
    eprintln!("install: {} ({tools} system tools)", libexec.display());

    let man_dir = prefix.join("share").join("man").join("man1");
    let pages = man_pages(&installed, &man_dir)?;
    eprintln!("install: {} ({pages} man pages)", man_dir.display());

    for (shell, relative) in COMPLETIONS {
        let path = prefix.join(relative);
        if let Some(parent) = path.parent() {
            create(parent)?;
        }
        let script = output_of(toolsmith(&installed).args(["completions", shell]))?;
        fs::write(&path, script)
            .map_err(|error| Failure(format!("cannot write {}: {error}", path.display())))?;
        eprintln!("install: {}", path.display());
    }
    eprintln!(
        "install: done; put {} on PATH and run `toolsmith doctor`",
        bin.display()
    );
    Ok(())
}

/// `cargo xtask man`: builds the dev binary and writes its man pages into `out`.
pub(crate) fn man(root: &Path, out: &Path) -> Result<(), Failure> {
    let binary = build(root, true)?;
    let pages = man_pages(&binary, out)?;
    eprintln!("man: {pages} pages in {}", out.display());
    Ok(())
}

/// `cargo build` of the `toolsmith` binary, its output shown as it comes; returns the binary.
fn build(root: &Path, debug: bool) -> Result<PathBuf, Failure> {
    let mut args = vec!["build", "--package", "toolsmith", "--bin", "toolsmith"];
    if !debug {
        args.push("--release");
    }
    eprintln!("install: cargo {}", args.join(" "));
    let status = crate::cargo::command()
        .args(&args)
        .current_dir(root)
        .status()
        .map_err(|error| {
            Failure(format!(
                "could not start `{}`: {error}",
                crate::cargo::program().to_string_lossy()
            ))
        })?;
    if !status.success() {
        return Err(Failure(format!(
            "`cargo {}` exited with {status}",
            args.join(" ")
        )));
    }
    Ok(target_dir(root)
        .join(if debug { "debug" } else { "release" })
        .join("toolsmith"))
}

/// Runs `binary man --out DIR`; returns the number of pages it wrote.
fn man_pages(binary: &Path, out: &Path) -> Result<usize, Failure> {
    let listing = output_of(toolsmith(binary).arg("man").arg("--out").arg(out))?;
    Ok(String::from_utf8_lossy(&listing).lines().count())
}

fn toolsmith(binary: &Path) -> Command {
    #[expect(
        clippy::disallowed_methods,
        reason = "xtask runs the binary it just built to generate its man pages and completions"
    )]
    let mut command = Command::new(binary);
    command.arg("--color").arg("never");
    command
}

/// The stdout of `command`, which must succeed (its stderr is passed through).
fn output_of(command: &mut Command) -> Result<Vec<u8>, Failure> {
    let output = command
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|error| Failure(format!("could not run {command:?}: {error}")))?;
    if !output.status.success() {
        return Err(Failure(format!(
            "{command:?} exited with {}",
            output.status
        )));
    }
    Ok(output.stdout)
}

/// Copies every file of `from` into `to`, keeping the modes;
/// a file of `to` that is no longer bundled is removed, so a reinstall leaves
/// no stale tool behind. Returns the number of tools.
fn install_system_tools(from: &Path, to: &Path) -> Result<usize, Failure> {
    create(to)?;
    let mut bundled = Vec::new();
    for entry in read_dir(from)? {
        let name = entry.file_name();
        if !entry.path().is_file() {
            continue;
        }
        copy_file(&entry.path(), &to.join(&name))?;
        bundled.push(name);
    }
    for entry in read_dir(to)? {
        if !bundled.contains(&entry.file_name()) && entry.path().is_file() {
            fs::remove_file(entry.path()).map_err(|error| {
                Failure(format!("cannot remove {}: {error}", entry.path().display()))
            })?;
        }
    }
    Ok(bundled.len())
}

fn read_dir(dir: &Path) -> Result<Vec<fs::DirEntry>, Failure> {
    let cannot = |error: std::io::Error| Failure(format!("cannot read {}: {error}", dir.display()));
    fs::read_dir(dir)
        .map_err(cannot)?
        .map(|entry| entry.map_err(cannot))
        .collect()
}

fn create(dir: &Path) -> Result<(), Failure> {
    fs::create_dir_all(dir)
        .map_err(|error| Failure(format!("cannot create {}: {error}", dir.display())))
}

/// Copies through a temporary file and a rename, so that replacing a running
/// binary works and a reader never sees half a file.
fn copy_file(from: &Path, to: &Path) -> Result<(), Failure> {
    let temporary = to.with_extension("installing");
    let failed = |what: &str, error: std::io::Error| {
        Failure(format!(
            "cannot {what} {} to {}: {error}",
            from.display(),
            to.display()
        ))
    };
    fs::copy(from, &temporary).map_err(|error| failed("copy", error))?;
    let mode = fs::metadata(from)
        .map_err(|error| failed("read the mode of", error))?
        .permissions()
        .mode();
    fs::set_permissions(&temporary, fs::Permissions::from_mode(mode & 0o755 | 0o644))
        .map_err(|error| failed("set the mode for", error))?;
    fs::rename(&temporary, to).map_err(|error| failed("move", error))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::install::{parse_install, parse_man};

    fn args(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn install_options() {
        let parsed = |given: &[&str]| parse_install(&args(given)).map_err(|failure| failure.0);
        assert_eq!(
            parsed(&["--prefix=/opt/ts"]).unwrap(),
            (PathBuf::from("/opt/ts"), false)
        );
        assert_eq!(
            parsed(&["--debug", "--prefix", "p"]).unwrap(),
            (PathBuf::from("p"), true)
        );
        assert_eq!(
            parsed(&[]).unwrap_err(),
            "`install` needs `--prefix DIR` (e.g. --prefix ~/.local)"
        );
        assert_eq!(
            parsed(&["--prefix"]).unwrap_err(),
            "`--prefix` needs a directory"
        );
        assert_eq!(
            parsed(&["--fast"]).unwrap_err(),
            "unknown option `--fast` for `install`"
        );
    }

    #[test]
    fn man_options() {
        let parsed = |given: &[&str]| parse_man(&args(given)).map_err(|failure| failure.0);
        assert_eq!(parsed(&[]).unwrap(), None);
        assert_eq!(parsed(&["--out", "x"]).unwrap(), Some(PathBuf::from("x")));
        assert_eq!(parsed(&["--out"]).unwrap_err(), "`--out` needs a directory");
        assert_eq!(
            parsed(&["--out=x", "y"]).unwrap_err(),
            "unknown option `y` for `man`"
        );
    }
}
