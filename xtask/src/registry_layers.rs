//! The registry's layering, checked over its sources: `formats/` never imports `discovery/`,
//! `call/` or the front door (`front.rs`), `discovery/` never imports `call/` or `front`,
//! `call/` never imports `front`, and no module imports through the crate root.
//!
//! The layers, lowest first: the leaves at the top of `src/` (names, schemas, envelopes, ...),
//! `formats/` (how a file says what tool it is), `discovery/` (finding and loading tools),
//! `call/` (running them) and `front.rs` (the front door, `Toolsmith`, over all of them). A layer may use the ones below it, never the ones above, so that
//! adding a format never touches discovery or calls, and the crate has no hidden cycle.
//! Inside the registry, items are reached by their module path (`crate::formats::Format`):
//! `lib.rs` re-exports the public API for other crates only, and an import through it
//! (`use crate::{Tool, Catalog}`, `crate::Tool`) would hide which module depends on which.
//!
//! The check reads lines, not a syntax tree: comment lines are skipped, and a `crate::` path
//! in code is judged by its first segment.

use std::fmt;
use std::fs;
use std::path::Path;

use anyhow::Context;

use crate::CheckFailed;

/// The registry's source directory, relative to the workspace root.
const SOURCE_DIR: &str = "crates/registry/src";

/// The layers with a rule, and the layers each may not import.
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("formats", &["discovery", "call", "front"]),
    ("discovery", &["call", "front"]),
    ("call", &["front"]),
];

/// One import the layering forbids.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Violation {
    /// Relative to the workspace root, with `/` separators.
    path: String,
    /// 1-based.
    line: usize,
    /// The rule and the import, as one sentence.
    message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: [registry-layers] {}",
            self.path, self.line, self.message
        )
    }
}

/// Checks the registry of the workspace at `root`, printing every violation on stderr.
pub(crate) fn run(root: &Path) -> anyhow::Result<()> {
    let violations = check_tree(root)?;
    for violation in &violations {
        eprintln!("{violation}");
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(CheckFailed(format!(
            "the registry's layering has {} violation(s)",
            violations.len()
        ))
        .into())
    }
}

/// Reads every `.rs` file under the registry's sources and checks them.
fn check_tree(root: &Path) -> anyhow::Result<Vec<Violation>> {
    let source_dir = root.join(SOURCE_DIR);
    let mut sources = Vec::new();
    read_sources(&source_dir, "", &mut sources)?;
    sources.sort();
    Ok(check_sources(&sources))
}

/// Adds the `.rs` files under `dir` as (path relative to the source directory, text).
fn read_sources(
    dir: &Path,
    prefix: &str,
    sources: &mut Vec<(String, String)>,
) -> anyhow::Result<()> {
    let entries =
        fs::read_dir(dir).with_context(|| format!("could not list `{}`", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("could not list `{}`", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let relative = format!("{prefix}{name}");
        if path.is_dir() {
            read_sources(&path, &format!("{relative}/"), sources)?;
        } else if name.ends_with(".rs") {
            let text = fs::read_to_string(&path)
                .with_context(|| format!("could not read `{}`", path.display()))?;
            sources.push((relative, text));
        }
    }
    Ok(())
}

/// Checks `sources`, each a path relative to the registry's `src/` and its text. The crate's
/// top-level modules are those `lib.rs` declares; without a `lib.rs` none are known, and every
/// `crate::` path counts as one through the root.
fn check_sources(sources: &[(String, String)]) -> Vec<Violation> {
    let modules = sources
        .iter()
        .find(|(path, _)| path == "lib.rs")
        .map(|(_, text)| declared_modules(text))
        .unwrap_or_default();
    let mut violations = Vec::new();
    for (path, text) in sources {
        if path == "lib.rs" {
            continue;
        }
        check_file(path, text, &modules, &mut violations);
    }
    violations
}

/// The modules a `lib.rs` declares (`mod name;`, `pub mod name;`, `pub(crate) mod name;`).
fn declared_modules(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub(crate) ")
                .or_else(|| line.strip_prefix("pub "))
                .unwrap_or(line);
            let name = rest.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_owned())
        })
        .collect()
}

/// Adds the forbidden imports of the file at `path` (relative to `src/`).
fn check_file(path: &str, text: &str, modules: &[String], violations: &mut Vec<Violation>) {
    let layer = path.split('/').next().unwrap_or_default();
    let forbidden = FORBIDDEN
        .iter()
        .find(|(name, _)| *name == layer)
        .map_or(&[][..], |(_, forbidden)| *forbidden);
    let shown = format!("{SOURCE_DIR}/{path}");
    for (index, line) in text.lines().enumerate() {
        for target in crate_paths(code_of(line)) {
            let first = target
                .split("::")
                .next()
                .unwrap_or_default()
                .trim_end_matches(';');
            let message = if target.starts_with('{') {
                Some(
                    "`use crate::{…}` imports through the crate root; import each item by its module path"
                        .to_owned(),
                )
            } else if !modules.iter().any(|module| module == first) {
                Some(format!(
                    "`crate::{first}` goes through the crate root's re-export; use the module path of `{first}`"
                ))
            } else if forbidden.contains(&first) {
                Some(format!(
                    "`crate::{target}`: {layer}/ may not import {first}/ (formats/ never imports discovery/, call/ or front, discovery/ never imports call/ or front, call/ never imports front)"
                ))
            } else {
                None
            };
            if let Some(message) = message {
                violations.push(Violation {
                    path: shown.clone(),
                    line: index + 1,
                    message,
                });
            }
        }
    }
}

/// The line without its comment: nothing for a `//` line (docs included, so doc links are
/// free to name any item), else the text before a ` // ` comment.
fn code_of(line: &str) -> &str {
    let trimmed = line.trim_start();
    if trimmed.starts_with("//") {
        return "";
    }
    line.split(" // ").next().unwrap_or_default()
}

/// The path after each `crate::` in `code`, up to the first character that cannot continue
/// it (`crate::formats::Format` gives `formats::Format`, `use crate::{A, B}` gives `{`).
fn crate_paths(code: &str) -> Vec<&str> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(start) = rest.find("crate::") {
        let preceded_by_word = rest[..start]
            .chars()
            .next_back()
            .is_some_and(|character| character.is_alphanumeric() || character == '_');
        let after = &rest[start + "crate::".len()..];
        let end = after
            .find(|character: char| {
                !(character.is_alphanumeric() || character == '_' || character == ':')
            })
            .map_or(after.len(), |end| if end == 0 { 1 } else { end });
        if !preceded_by_word {
            paths.push(after[..end].trim_end_matches(':'));
        }
        rest = &after[end.min(after.len())..];
    }
    paths
}

#[cfg(test)]
mod tests {
    use crate::registry_layers::{check_sources, check_tree};

    const LIB: &str = "//! The crate.\nmod call;\nmod discovery;\npub(crate) mod formats;\nmod front;\nmod name;\n\npub use crate::name::ToolName;\n";

    /// Checks a tree of `lib.rs` and the file at `path` with `text`; `expect` lists each
    /// violation as `line: message` with the path left out, and the path is checked apart.
    fn check(path: &str, text: &str, expect: &[&str]) {
        let sources = vec![
            ("lib.rs".to_owned(), LIB.to_owned()),
            (path.to_owned(), text.to_owned()),
        ];
        let violations = check_sources(&sources);
        for violation in &violations {
            assert_eq!(violation.path, format!("crates/registry/src/{path}"));
        }
        let actual: Vec<String> = violations
            .iter()
            .map(|violation| format!("{}: {}", violation.line, violation.message))
            .collect();
        assert_eq!(actual, expect, "{path}:\n{text}");
    }

    #[test]
    fn formats_may_not_import_discovery_or_call() {
        check(
            "formats/kodelet.rs",
            "//! k\nuse crate::name::ToolName;\nuse crate::formats::Format;\n",
            &[],
        );
        check(
            "formats/kodelet.rs",
            "//! k\nuse crate::discovery::cache::Probed;\n",
            &[
                "2: `crate::discovery::cache::Probed`: formats/ may not import discovery/ (formats/ never imports discovery/, call/ or front, discovery/ never imports call/ or front, call/ never imports front)",
            ],
        );
        check(
            "formats/manifest/mod.rs",
            "//! m\nfn f() {\n    crate::call::invoke::invoke();\n}\n",
            &[
                "3: `crate::call::invoke::invoke`: formats/ may not import call/ (formats/ never imports discovery/, call/ or front, discovery/ never imports call/ or front, call/ never imports front)",
            ],
        );
    }

    #[test]
    fn discovery_may_not_import_call() {
        check(
            "discovery/scan.rs",
            "//! s\nuse crate::formats::{Format, manifest};\nuse crate::discovery::cache::Fingerprint;\n",
            &[],
        );
        check(
            "discovery/live.rs",
            "//! l\nuse crate::call::invoke::{invoke, RunConfig};\n",
            &[
                "2: `crate::call::invoke`: discovery/ may not import call/ (formats/ never imports discovery/, call/ or front, discovery/ never imports call/ or front, call/ never imports front)",
            ],
        );
        // Nor may the calls reach the front door above them.
        check(
            "call/invoke.rs",
            "//! i\nuse crate::front::Toolsmith;\n",
            &[
                "2: `crate::front::Toolsmith`: call/ may not import front/ (formats/ never imports discovery/, call/ or front, discovery/ never imports call/ or front, call/ never imports front)",
            ],
        );
        // The calls may use both layers below them.
        check(
            "call/invoke.rs",
            "//! i\nuse crate::discovery::catalog::Catalog;\nuse crate::formats::Runner;\n",
            &[],
        );
    }

    #[test]
    fn no_import_through_the_crate_root() {
        check(
            "tool.rs",
            "//! t\nuse crate::name::ToolName;\n/// See [`Catalog`](crate::Catalog).\nfn f() {} // crate::Tool in a comment\n",
            &[],
        );
        check(
            "tool.rs",
            "//! t\nuse crate::{Body, Catalog};\n",
            &[
                "2: `use crate::{…}` imports through the crate root; import each item by its module path",
            ],
        );
        check(
            "policy.rs",
            "//! p\nuse crate::ToolName;\nfn f() -> crate::ToolName {\n    todo\n}\n",
            &[
                "2: `crate::ToolName` goes through the crate root's re-export; use the module path of `ToolName`",
                "3: `crate::ToolName` goes through the crate root's re-export; use the module path of `ToolName`",
            ],
        );
        // `crate::` inside a longer word is not a path (`my_crate::x`).
        check("name.rs", "//! n\nuse my_crate::Thing;\n", &[]);
    }

    /// The registry as it stands keeps its layering, so `cargo test` alone enforces it.
    #[test]
    fn registry_is_layered() {
        let violations: Vec<String> = check_tree(&crate::project_root())
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            violations.is_empty(),
            "layering violations:\n{}",
            violations.join("\n")
        );
    }
}
