//! The test context: a temp directory with a scrubbed environment, fixture tools, and snapshot filters.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Metadata keys whose values depend on timing or the machine; their values
/// are replaced by placeholders.
const VOLATILE_KEYS: &[&str] = &["execution_time_ms", "cpu_time_ms", "peak_rss_kb", "backend"];

/// Metadata keys that only some containment backends report, or whose values
/// depend on the kernel's features (`sandbox`, asserted in `sandbox.rs`); they are removed.
const BACKEND_DEPENDENT_KEYS: &[&str] = &["leftovers_killed", "sandbox"];

/// One test's world: a temp directory holding a project directory (the
/// current directory of `toolsmith`), a home directory, and a `tools`
/// directory for fixture tools.
pub(crate) struct TestContext {
    _temp: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) project: PathBuf,
    pub(crate) tools: PathBuf,
    filters: Vec<(String, String)>,
}

impl TestContext {
    pub(crate) fn new() -> TestContext {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().canonicalize().unwrap();
        let project = root.join("project");
        let tools = root.join("tools");
        for dir in [&project, &tools, &root.join("home"), &root.join("tmp")] {
            fs::create_dir_all(dir).unwrap();
        }
        let filters = vec![
            (
                regex_escape(&examples_dir().display().to_string()),
                "[EXAMPLES]".to_owned(),
            ),
            // The system layer is found relative to the binary, which lives in the target dir.
            (
                regex_escape(&binary_prefix().display().to_string()),
                "[PREFIX]".to_owned(),
            ),
            (
                regex_escape(&root.display().to_string()),
                "[TEMP]".to_owned(),
            ),
            (r"\b\d+\.\d+m?s\b".to_owned(), "[DURATION]".to_owned()),
            (r"\bpid \d+\b".to_owned(), "pid [PID]".to_owned()),
            // The namespaces a call gets depend on the kernel (`show`).
            (
                r"(isolation:(?:\x1b\[0m|\[ESC\]\[0m)?) +.*".to_owned(),
                "$1     [ISOLATION]".to_owned(),
            ),
            (
                r#""isolation": \[[^\]]*\]"#.to_owned(),
                r#""isolation": "[ISOLATION]""#.to_owned(),
            ),
            (
                r#""not_enforced": \[[^\]]*\]"#.to_owned(),
                r#""not_enforced": "[NOT_ENFORCED]""#.to_owned(),
            ),
        ];
        TestContext {
            _temp: temp,
            root,
            project,
            tools,
            filters,
        }
    }

    /// A `toolsmith` command with a scrubbed environment: only `PATH`, and
    /// `HOME`, `TOOLSMITH_HOME` and `TMPDIR` (where the runs' private temporary directories
    /// go, checked empty by the leak oracle) inside the temp directory.
    pub(crate) fn command(&self) -> Command {
        #[expect(
            clippy::disallowed_methods,
            reason = "black-box tests start the binary under test"
        )]
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolsmith-dup"));
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root.join("home"))
            .env("TOOLSMITH_HOME", self.root.join("home/.config/toolsmith"))
            .env("TMPDIR", self.tmpdir())
            .current_dir(&self.project);
        command
    }

    /// The TMPDIR toolsmith is given.
    pub(crate) fn tmpdir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// `toolsmith --tools-dir <fixture tools>` ready for a subcommand.
    pub(crate) fn with_tools(&self) -> Command {
        let mut command = self.command();
        command.arg("--tools-dir").arg(&self.tools);
        command
    }

    /// `toolsmith --tools-dir <examples/tools>` ready for a subcommand.
    pub(crate) fn with_examples(&self) -> Command {
        let mut command = self.command();
        command.arg("--tools-dir").arg(examples_dir());
        command
    }

    /// A directory below the project where tools may leave markers under the default profile
    /// (which lets a tool write only below the project; markers go in a directory of their own,
    /// which also holds where the seccomp supervisor is unavailable and the project's root is
    /// sealed while its `.git` is missing).
    pub(crate) fn outbox(&self) -> PathBuf {
        let outbox = self.project.join("outbox");
        fs::create_dir_all(&outbox).unwrap();
        outbox
    }

    /// Writes an executable fixture tool into the fixture tools directory.
    pub(crate) fn tool(&self, name: &str, script: &str) -> PathBuf {
        write_executable(&self.tools.join(name), script)
    }

    /// Writes a file relative to the project directory. A file in `.toolsmith/` makes the
    /// project the user's own ([`TestContext::own_project`]): tests that are not about trust
    /// keep their meaning; the trust tests write the project's files with [`write_file`].
    pub(crate) fn project_file(&self, relative: &str, text: &str) -> PathBuf {
        if relative.starts_with(".toolsmith/") {
            self.own_project();
        }
        write_file(&self.project.join(relative), text)
    }

    /// The user config (`$TOOLSMITH_HOME/config.toml`), replacing any.
    pub(crate) fn user_config(&self, text: &str) -> PathBuf {
        write_file(&self.root.join("home/.config/toolsmith/config.toml"), text)
    }

    /// Makes the project the user's own, as it was before project trust: the user config
    /// pre-trusts it (`[trust] paths`) and lets its config loosen the defaults.
    pub(crate) fn own_project(&self) {
        self.user_config(&format!(
            "[trust]\npaths = [{:?}]\nproject_may_loosen = true\n",
            self.project.display().to_string()
        ));
    }
}

/// Writes `text` to `path`, creating its directory.
pub(crate) fn write_file(path: &Path, text: &str) -> PathBuf {
    {
        let path = path.to_path_buf();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }
}

impl TestContext {
    /// Runs `command` and renders its exit code, stdout and stderr with the
    /// filters applied; JSON stdout has its volatile metadata normalized.
    pub(crate) fn render(&self, command: &mut Command) -> String {
        let output = command.output().unwrap();
        self.render_output(&output)
    }

    pub(crate) fn render_output(&self, output: &Output) -> String {
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stdout = match serde_json::from_str::<Value>(&stdout) {
            Ok(mut value) => {
                normalize(&mut value);
                format!("{}\n", serde_json::to_string_pretty(&value).unwrap())
            }
            Err(_) => stdout,
        };
        let stderr = String::from_utf8_lossy(&output.stderr);
        let rendered = format!(
            "exit_code: {}\n----- stdout -----\n{stdout}----- stderr -----\n{stderr}",
            output
                .status
                .code()
                .map_or("signal".to_owned(), |code| code.to_string()),
        );
        // Escape characters made visible (`[ESC]`), so that a coloured snapshot is readable,
        // and trailing spaces (clap pads blank help lines) removed.
        let visible = rendered.replace('\u{1b}', "[ESC]");
        let lines: Vec<&str> = visible.lines().map(str::trim_end).collect();
        lines.join("\n") + "\n"
    }

    /// Adds a snapshot filter: `pattern` (a regex) becomes `replacement` in every snapshot
    /// of this context.
    pub(crate) fn add_filter(&mut self, pattern: &str, replacement: &str) {
        self.filters
            .push((pattern.to_owned(), replacement.to_owned()));
    }

    /// insta settings with this context's filters.
    pub(crate) fn insta_settings(&self) -> insta::Settings {
        let mut settings = insta::Settings::clone_current();
        for (pattern, replacement) in &self.filters {
            settings.add_filter(pattern, replacement.as_str());
        }
        settings
    }
}

/// The directory above the one holding the binary under test: its system layer is
/// `[PREFIX]/libexec/toolsmith`.
pub(crate) fn binary_prefix() -> PathBuf {
    let binary = Path::new(env!("CARGO_BIN_EXE_toolsmith-dup"));
    binary.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The target directory the binary under test was built in (`<target>/debug/toolsmith-dup`).
pub(crate) fn target_dir() -> PathBuf {
    binary_prefix()
}

/// The root of the repository (the workspace).
pub(crate) fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .canonicalize()
        .unwrap()
}

/// The repository's `examples/tools`.
pub(crate) fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/tools")
        .canonicalize()
        .unwrap()
}

pub(crate) fn write_executable(path: &Path, script: &str) -> PathBuf {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, script).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// A shell tool speaking the Kodelet protocol: `description` prints a
/// description of `name` with `schema`, `run` runs `body`.
pub(crate) fn shell_tool(name: &str, schema: &str, body: &str) -> String {
    format!(
        "#!/bin/sh\ncase \"$1\" in\n  description) printf '%s\\n' '{{\"name\": \"{name}\", \"description\": \"The {name} fixture\", \"input_schema\": {schema}}}' ;;\n  run) {body} ;;\nesac\n"
    )
}

/// A shell tool speaking the ikigai protocol: `--schema` prints `schema`
/// verbatim; a call with no argument runs `body` with the arguments on stdin.
/// Any argument on a call is an error, so a test notices if the tool is run
/// the Kodelet way (`tool run`).
pub(crate) fn ikigai_tool(schema: &str, body: &str) -> String {
    format!(
        "#!/bin/sh\nif [ \"$1\" = \"--schema\" ]; then\n  cat <<'SCHEMA'\n{schema}\nSCHEMA\n  exit 0\nfi\nif [ \"$#\" -ne 0 ]; then\n  echo \"an ikigai tool takes no argument, got: $*\" >&2\n  exit 64\nfi\n{body}\n"
    )
}

/// Replaces the volatile values of every `metadata` object in `value`.
fn normalize(value: &mut Value) {
    match value {
        Value::Object(object) => {
            for (key, field) in object.iter_mut() {
                match field {
                    Value::Object(metadata) if key == "metadata" => normalize_metadata(metadata),
                    _ => normalize(field),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

fn normalize_metadata(metadata: &mut serde_json::Map<String, Value>) {
    for key in BACKEND_DEPENDENT_KEYS {
        metadata.shift_remove(*key);
    }
    for (key, field) in metadata.iter_mut() {
        if VOLATILE_KEYS.contains(&key.as_str()) && !field.is_null() {
            *field = Value::String(format!("[{}]", key.to_uppercase()));
        }
    }
}

/// `text` as a regex matching itself.
fn regex_escape(text: &str) -> String {
    let mut escaped = String::new();
    for character in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(character) {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

/// Runs a command and asserts an inline snapshot of its exit code, stdout and stderr, with
/// the context's filters: the one snapshot macro of the black-box tests.
macro_rules! cli_snapshot {
    ($context:expr, $command:expr, @$snapshot:literal) => {{
        let rendered = $context.render($command);
        $context
            .insta_settings()
            .bind(|| insta::assert_snapshot!(rendered, @$snapshot));
    }};
}
