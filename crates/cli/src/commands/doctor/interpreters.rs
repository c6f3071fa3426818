//! The interpreters the tools need (their shebangs), found on the `PATH` tools get, each with how to install it.

use std::path::Path;

use toolsmith_registry::Catalog;

use crate::commands::doctor::{Check, Status};

/// What runs a tool: a program looked up in the tools' `PATH` (`#!/usr/bin/env NAME`, a
/// manifest's shell), or an absolute path (`#!/usr/bin/python3`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Interpreter {
    /// Found by name in `PATH`, as `env` finds it.
    Name(String),
    /// A manifest's shell: found in `PATH`, then /bin and /usr/bin, as a call finds it.
    Shell(&'static str),
    /// An absolute path from a `#!` line.
    Path(std::path::PathBuf),
}

impl Interpreter {
    fn label(&self) -> String {
        match self {
            Interpreter::Name(name) => name.clone(),
            Interpreter::Shell(name) => (*name).to_owned(),
            Interpreter::Path(path) => path.display().to_string(),
        }
    }
}

/// The interpreter a `#!` line names: `#!/usr/bin/env [-S] [VAR=value]... NAME ...` names
/// NAME, any other `#!PATH ...` names PATH. A file without one (a binary) needs none.
pub(super) fn shebang_interpreter(path: &Path) -> Option<Interpreter> {
    // Problems name FIFOs and devices too: opened without blocking, read only if regular.
    let head = toolsmith_registry::read_start(path, toolsmith_registry::Links::Follow, 256).ok()?;
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|byte| *byte == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let program = words.next()?;
    if Path::new(program).file_name() == Some(std::ffi::OsStr::new("env")) {
        let name = words.find(|word| !word.starts_with('-') && !word.contains('='))?;
        return Some(Interpreter::Name(name.to_owned()));
    }
    Some(Interpreter::Path(std::path::PathBuf::from(program)))
}

/// The interpreters the discovered tools need, tools that failed to load included (a
/// missing interpreter is a common reason), with the tool names that need each.
pub(super) fn needed_interpreters(catalog: &Catalog) -> Vec<(Interpreter, Vec<String>)> {
    // By label: `bash` named by a `#!` line and by a manifest is one line, looked up as
    // `env` looks it up (the stricter of the two).
    let mut needed: std::collections::BTreeMap<String, (Interpreter, Vec<String>)> =
        Default::default();
    let mut add = |interpreter: Interpreter, user: String| {
        let entry = needed
            .entry(interpreter.label())
            .or_insert_with(|| (interpreter.clone(), Vec::new()));
        if matches!(entry.0, Interpreter::Shell(_)) && matches!(interpreter, Interpreter::Name(_)) {
            entry.0 = interpreter;
        }
        entry.1.push(user);
    };
    let tools = catalog
        .tools()
        .iter()
        .chain(catalog.shadowed().iter().map(|shadowed| &shadowed.tool));
    for tool in tools {
        let interpreter = match tool.kind() {
            // A manifest that names no shell runs with bash, else sh: sh is what it needs.
            toolsmith_registry::Format::Manifest => {
                Some(Interpreter::Shell(tool.manifest_shell().unwrap_or("sh")))
            }
            _ => shebang_interpreter(tool.path()),
        };
        if let Some(interpreter) = interpreter {
            add(interpreter, tool.name().as_str().to_owned());
        }
    }
    for problem in catalog.problems() {
        let is_manifest = problem.path.extension().is_some_and(|ext| ext == "md");
        if is_manifest || !problem.path.is_file() {
            continue;
        }
        if let Some(interpreter) = shebang_interpreter(&problem.path) {
            add(interpreter, problem.path.display().to_string());
        }
    }
    needed.into_values().collect()
}

/// Where `interpreter` is found with the tools' `PATH` (`env` searches /bin:/usr/bin when
/// there is none; a manifest's shell is also looked for there).
pub(super) fn find_interpreter(
    interpreter: &Interpreter,
    tools_path: Option<&std::ffi::OsStr>,
) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        std::fs::metadata(path)
            .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
    };
    match interpreter {
        Interpreter::Path(path) => executable(path).then(|| path.clone()),
        Interpreter::Name(name) => {
            let search = tools_path.unwrap_or(std::ffi::OsStr::new("/bin:/usr/bin"));
            std::env::split_paths(search)
                .filter(|dir| dir.is_absolute())
                .map(|dir| dir.join(name))
                .find(|candidate| executable(candidate))
        }
        Interpreter::Shell(name) => std::env::split_paths(tools_path.unwrap_or_default())
            .filter(|dir| dir.is_absolute())
            .chain([
                std::path::PathBuf::from("/bin"),
                std::path::PathBuf::from("/usr/bin"),
            ])
            .map(|dir| dir.join(name))
            .find(|candidate| executable(candidate)),
    }
}

/// How to install an interpreter, by its name.
pub(super) fn interpreter_fix(interpreter: &Interpreter) -> String {
    let name = match interpreter {
        Interpreter::Name(name) => name.as_str(),
        Interpreter::Shell(name) => name,
        Interpreter::Path(path) => path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default(),
    };
    let package = match name {
        "python3" | "python" => Some("python3"),
        "bash" => Some("bash"),
        "sh" | "dash" => Some("dash"),
        "node" | "nodejs" => Some("nodejs"),
        "perl" => Some("perl"),
        "ruby" => Some("ruby"),
        "zsh" => Some("zsh"),
        "jq" => Some("jq"),
        _ => None,
    };
    let install = match package {
        Some(package) => format!("install it (e.g. `apt-get install {package}`)"),
        None => format!("install `{name}`"),
    };
    match interpreter {
        Interpreter::Name(_) | Interpreter::Shell(_) => {
            format!("{install} into a directory of the PATH tools get")
        }
        Interpreter::Path(path) => format!(
            "{install} so that {} exists, or change the tools' `#!` line to `#!/usr/bin/env {name}`",
            path.display()
        ),
    }
}

/// One line per interpreter the discovered tools need: where it is, or that it is missing
/// (a problem: those tools cannot run), with the fix.
pub(super) fn interpreter_checks(
    catalog: &Catalog,
    tools_path: Option<&std::ffi::OsStr>,
) -> Vec<Check> {
    needed_interpreters(catalog)
        .into_iter()
        .map(|(interpreter, tools)| {
            let needed_by = format!(
                "{} {}: {}",
                tools.len(),
                if tools.len() == 1 { "tool" } else { "tools" },
                tools.join(", ")
            );
            match find_interpreter(&interpreter, tools_path) {
                // Where it was found is left out: it differs between machines, and
                // `command -v` tells it.
                Some(_) => Check {
                    name: interpreter.label(),
                    status: Status::Ok,
                    detail: format!("found ({needed_by})"),
                    fix: None,
                },
                None => Check {
                    name: interpreter.label(),
                    status: Status::Problem,
                    detail: match interpreter {
                        Interpreter::Name(_) | Interpreter::Shell(_) => {
                            format!("missing from PATH ({needed_by})")
                        }
                        Interpreter::Path(_) => format!("missing ({needed_by})"),
                    },
                    fix: Some(interpreter_fix(&interpreter)),
                },
            }
        })
        .collect()
}
