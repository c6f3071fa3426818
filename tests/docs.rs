//! The docs test: every command shown in `docs/*.md`, `README.md` and `ARCHITECTURE.md` is run, so the docs cannot rot.
//!
//! The convention (also written at the top of `docs/README.md`):
//!
//! - A fenced block whose info string is exactly `sh` is executed; blocks that
//!   are not meant to run use `text`, `json`, `toml`, `console` (output), ...
//!   `bash` and `shell` are refused, so that nothing looks runnable and is not.
//! - Each non-empty line that is not a comment is one command (a trailing `\`
//!   continues it on the next line), run with `bash -c`; the commands of one file
//!   run in order, in one directory, so a file may build on what an earlier
//!   command wrote (but not on shell variables or `cd`).
//! - A command must exit 0 unless the line ends with `# exit N`; a line ending
//!   with a comment `# docs-test: skip` (maybe followed by the reason) is shown to readers but not run (only for commands
//!   that cannot run inside a test, like `cargo xtask ci`, which runs this test).
//! - `docs/*.md` run in a fresh temporary directory holding a copy of the
//!   repository's `examples/` and `deploy/` (so commands are written as from the repository
//!   root: `toolsmith --tools-dir examples/tools list`), with `toolsmith` on
//!   `PATH` the binary under test and no user config (`HOME`, `TOOLSMITH_HOME`
//!   and `XDG_*` point into the temporary directory).
//! - A block whose info string has `file=PATH` (e.g. ```` ```python file=examples/tools/hello ````)
//!   shows a file of the repository and must equal it, byte for byte.
//! - `README.md` is the newcomer's path and runs from the checkout itself with
//!   the same isolation: its set-up installs toolsmith under the temporary
//!   `HOME` with cargo (the target directory of this test build, so only what
//!   changed is rebuilt), and must leave the checkout as it found it.

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::context::{repository_root, target_dir};

/// One command of an `sh` block.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DocCommand {
    /// The line of the file where the command starts (1-based).
    line: usize,
    /// The command as bash reads it (continuations kept).
    text: String,
    /// The exit status it must have.
    expected: i32,
    /// `# docs-test: skip`: shown but not run.
    skipped: bool,
}

/// The marker of a command that is shown but not run.
const SKIP_MARKER: &str = "# docs-test: skip";

/// The marker of a command the test runs with more arguments, written after it
/// (`cargo xtask install --prefix ~/.local # docs-test: with --debug`).
const WITH_MARKER: &str = "# docs-test: with ";

/// The commands of every `sh` block of `markdown`, or the line of a block
/// whose info string looks runnable but is not `sh`.
fn commands(markdown: &str) -> Result<Vec<DocCommand>, String> {
    let mut commands = Vec::new();
    let mut in_block: Option<bool> = None; // Some(runnable) inside a fence
    let mut fence = "";
    let mut pending: Option<DocCommand> = None;
    for (index, line) in markdown.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim_start();
        match in_block {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    fence = "```";
                    let info = info.trim();
                    if matches!(info, "bash" | "shell" | "zsh" | "sh-session") {
                        return Err(format!(
                            "line {number}: a ```{info} block: use ```sh for commands the docs test runs, ```text or ```console otherwise"
                        ));
                    }
                    in_block = Some(info == "sh");
                } else if trimmed.starts_with("~~~") {
                    fence = "~~~";
                    in_block = Some(false);
                }
            }
            Some(runnable) => {
                if trimmed.starts_with(fence) {
                    if let Some(unfinished) = pending.take() {
                        return Err(format!(
                            "line {}: the block ends inside a command continued with `\\`",
                            unfinished.line
                        ));
                    }
                    in_block = None;
                    continue;
                }
                if !runnable {
                    continue;
                }
                let (body, continued) = match line.trim_end().strip_suffix('\\') {
                    Some(body) => (body.to_owned(), true),
                    None => (line.trim_end().to_owned(), false),
                };
                let mut command = match pending.take() {
                    Some(mut command) => {
                        command.text.push('\n');
                        command.text.push_str(&body);
                        command
                    }
                    None => {
                        if body.trim().is_empty() || body.trim_start().starts_with('#') {
                            continue;
                        }
                        DocCommand {
                            line: number,
                            text: body,
                            expected: 0,
                            skipped: false,
                        }
                    }
                };
                if continued {
                    command.text.push('\\');
                    pending = Some(command);
                    continue;
                }
                let last = command.text.lines().last().unwrap_or("").trim_end();
                if last.contains(SKIP_MARKER) {
                    command.skipped = true;
                } else if let Some((shown, extra)) = last.split_once(WITH_MARKER) {
                    let run = format!("{} {}", shown.trim_end(), extra.trim());
                    let start =
                        command.text.len() - command.text.lines().last().unwrap_or("").len();
                    command.text.replace_range(start.., &run);
                } else if let Some((_, status)) = last.rsplit_once("# exit ") {
                    command.expected = status
                        .trim()
                        .parse()
                        .map_err(|_| format!("line {number}: `# exit {status}` needs a number"))?;
                }
                commands.push(command);
            }
        }
    }
    if in_block.is_some() {
        return Err("a fenced block is not closed".to_owned());
    }
    Ok(commands)
}

/// The blocks with `file=PATH` in their info string: (line of the fence, PATH, content).
fn shown_files(markdown: &str) -> Vec<(usize, String, String)> {
    let mut shown = Vec::new();
    let mut current: Option<(usize, String, String)> = None;
    let mut in_other_block = false;
    for (index, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some((_, _, content)) = current.as_mut() {
            if trimmed.starts_with("```") {
                shown.extend(current.take());
            } else {
                content.push_str(line);
                content.push('\n');
            }
            continue;
        }
        if let Some(info) = trimmed.strip_prefix("```") {
            if in_other_block {
                in_other_block = false;
                continue;
            }
            match info
                .split_whitespace()
                .find_map(|word| word.strip_prefix("file="))
            {
                Some(path) => current = Some((index + 1, path.to_owned(), String::new())),
                None => in_other_block = true,
            }
        }
    }
    shown
}

/// A temporary world for one file's commands.
struct World {
    _temp: tempfile::TempDir,
    root: PathBuf,
}

impl World {
    fn new() -> World {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().canonicalize().unwrap();
        for dir in ["bin", "home", "cache", "config", "work"] {
            fs::create_dir_all(root.join(dir)).unwrap();
        }
        // The binary under test, as `toolsmith` on PATH.
        symlink(
            env!("CARGO_BIN_EXE_toolsmith-dup"),
            root.join("bin/toolsmith"),
        )
        .unwrap();
        World { _temp: temp, root }
    }

    /// `bash -c TEXT` in `cwd` with the isolated environment.
    fn bash(&self, text: &str, cwd: &Path, extra_path: &[PathBuf]) -> Command {
        #[expect(
            clippy::disallowed_methods,
            reason = "the docs test runs the documented commands as a reader would"
        )]
        let mut command = Command::new("bash");
        let mut path: Vec<PathBuf> = extra_path.to_vec();
        path.push(self.root.join("bin"));
        path.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let real_home = std::env::var_os("HOME").map(PathBuf::from);
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| real_home.as_ref().map(|home| home.join(".cargo")));
        let rustup_home = std::env::var_os("RUSTUP_HOME")
            .map(PathBuf::from)
            .or_else(|| real_home.as_ref().map(|home| home.join(".rustup")));
        command
            .args(["-o", "pipefail", "-c", text])
            .env_clear()
            .env("PATH", std::env::join_paths(path).unwrap())
            .env("HOME", self.root.join("home"))
            .env("TOOLSMITH_HOME", self.root.join("home/.config/toolsmith"))
            .env("XDG_CACHE_HOME", self.root.join("cache"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            // cargo in the README's commands: the toolchain of this build, and
            // its target directory, so only what changed is rebuilt.
            .env("CARGO_TARGET_DIR", target_dir())
            .current_dir(cwd);
        if let Some(cargo_home) = cargo_home {
            command.env("CARGO_HOME", cargo_home);
        }
        if let Some(rustup_home) = rustup_home {
            command.env("RUSTUP_HOME", rustup_home);
        }
        if let Some(toolchain) = std::env::var_os("RUSTUP_TOOLCHAIN") {
            command.env("RUSTUP_TOOLCHAIN", toolchain);
        }
        // Part of the build's identity: a cargo without the `CARGO_INCREMENTAL=0` of CI's
        // build made units of its own and rebuilt the workspace (minutes on 2 cores).
        if let Some(incremental) = std::env::var_os("CARGO_INCREMENTAL") {
            command.env("CARGO_INCREMENTAL", incremental);
        }
        command
    }
}

/// Runs the commands of `file` and returns one report per failure.
fn run_file(file: &Path, world: &World, cwd: &Path, extra_path: &[PathBuf]) -> Vec<String> {
    let markdown = fs::read_to_string(file).unwrap();
    let shown = file
        .strip_prefix(repository_root())
        .unwrap_or(file)
        .display()
        .to_string();
    let commands = match commands(&markdown) {
        Ok(commands) => commands,
        Err(error) => return vec![format!("{shown}: {error}")],
    };
    let mut failures = Vec::new();
    for command in commands.iter().filter(|command| !command.skipped) {
        let output = world.bash(&command.text, cwd, extra_path).output().unwrap();
        let status = output.status.code();
        if status != Some(command.expected) {
            let mut report = format!(
                "{shown}:{}: `{}` exited with {}, expected {}\n",
                command.line,
                command.text,
                status.map_or("a signal".to_owned(), |code| code.to_string()),
                command.expected
            );
            let _ = writeln!(
                report,
                "--- stdout ---\n{}--- stderr ---\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            failures.push(report);
        }
    }
    failures
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            // fs::copy keeps the permission bits (the execute bit of tools).
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn docs_commands_run() {
    let docs = repository_root().join("docs");
    let mut files: Vec<PathBuf> = fs::read_dir(&docs)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "md"))
        .collect();
    files.sort();
    let mut failures = Vec::new();
    let mut run = 0;
    for file in &files {
        let world = World::new();
        let work = world.root.join("work");
        copy_dir(&repository_root().join("examples"), &work.join("examples"));
        copy_dir(&repository_root().join("deploy"), &work.join("deploy"));
        run += commands(&fs::read_to_string(file).unwrap()).map_or(0, |commands| commands.len());
        failures.extend(run_file(file, &world, &work, &[]));
    }
    assert!(run > 0, "no command found in docs/*.md");
    assert!(
        failures.is_empty(),
        "{} documented command(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn docs_show_files_as_they_are() {
    let root = repository_root();
    let mut files: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "md"))
        .collect();
    files.push(root.join("README.md"));
    files.push(root.join("ARCHITECTURE.md"));
    let mut stale = Vec::new();
    let mut checked = 0;
    for file in &files {
        for (line, path, content) in shown_files(&fs::read_to_string(file).unwrap()) {
            checked += 1;
            let actual = fs::read_to_string(root.join(&path)).unwrap_or_default();
            if actual != content {
                stale.push(format!(
                    "{}:{line}: the block differs from {path}",
                    file.strip_prefix(&root).unwrap().display()
                ));
            }
        }
    }
    assert!(checked > 0, "no block shows a file");
    assert!(stale.is_empty(), "{}", stale.join("\n"));
}

#[test]
fn shown_files_are_found() {
    let markdown = "```text\nx\n```\n```python file=a/b\nline 1\n\nline 3\n```\n";
    assert_eq!(
        shown_files(markdown),
        [(4, "a/b".to_owned(), "line 1\n\nline 3\n".to_owned())]
    );
}

/// Follows the README from the checkout: set-up (an install under a temporary
/// `HOME`), the main job, and the tests (except `cargo xtask ci`, which runs
/// this test).
#[test]
fn readme_commands_run() {
    let root = repository_root();
    let status_before = git_status(&root);
    let world = World::new();
    // The README installs into ~/.local; that bin directory comes first on PATH,
    // as it does on a newcomer's machine.
    let local_bin = world.root.join("home/.local/bin");
    let failures = run_file(&root.join("README.md"), &world, &root, &[local_bin]);
    assert!(
        failures.is_empty(),
        "{} command(s) of README.md failed:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(
        git_status(&root),
        status_before,
        "following the README changed the checkout"
    );
}

/// The code map is run like the README, from the checkout: any command it shows must work
/// (today it names things rather than showing commands, and a ```bash block would fail here).
#[test]
fn architecture_commands_run() {
    let root = repository_root();
    let world = World::new();
    let failures = run_file(&root.join("ARCHITECTURE.md"), &world, &root, &[]);
    assert!(
        failures.is_empty(),
        "{} command(s) of ARCHITECTURE.md failed:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn git_status(root: &Path) -> String {
    #[expect(
        clippy::disallowed_methods,
        reason = "the README test checks that the checkout is left as it was"
    )]
    let output = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all"])
        .current_dir(root)
        .output();
    match output {
        Ok(output) if output.status.success() => {
            String::from_utf8_lossy(&output.stdout).into_owned()
        }
        // Not a git checkout (a source tarball): nothing to compare.
        _ => String::new(),
    }
}

#[test]
fn parser_reads_commands_statuses_and_markers() {
    let markdown = "\
text
```sh
# a comment
toolsmith list

toolsmith run nope # exit 1
toolsmith run hello \\
  --input '{}'
cargo xtask ci  # docs-test: skip (it runs this test)
cargo xtask install --prefix ~/.local # docs-test: with --debug
```
```text
not run
```
```json
{}
```
";
    let commands = commands(markdown).unwrap();
    let summary: Vec<(usize, &str, i32, bool)> = commands
        .iter()
        .map(|command| {
            (
                command.line,
                command.text.as_str(),
                command.expected,
                command.skipped,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (4, "toolsmith list", 0, false),
            (6, "toolsmith run nope # exit 1", 1, false),
            (7, "toolsmith run hello \\\n  --input '{}'", 0, false),
            (
                9,
                "cargo xtask ci  # docs-test: skip (it runs this test)",
                0,
                true
            ),
            (
                10,
                "cargo xtask install --prefix ~/.local --debug",
                0,
                false
            ),
        ]
    );
}

#[test]
fn parser_refuses_lookalike_blocks() {
    assert_eq!(
        commands("```bash\nls\n```\n").unwrap_err(),
        "line 1: a ```bash block: use ```sh for commands the docs test runs, ```text or ```console otherwise"
    );
    assert_eq!(
        commands("```sh\nls \\\n```\n").unwrap_err(),
        "line 2: the block ends inside a command continued with `\\`"
    );
    assert_eq!(
        commands("```sh\nls\n").unwrap_err(),
        "a fenced block is not closed"
    );
}
